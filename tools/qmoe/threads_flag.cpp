#include "threads_flag.hpp"

#include "flag_checks.hpp"
#include "qmoe/threads.hpp"

namespace qmoe::cli {

void add_threads_flag(CLI::App& cmd) {
  cmd.add_option_function<int>(
         "--threads", [](int threads) { set_cpu_threads(threads); },
         "Threads of the cpu backend (default: QMOE_CPU_THREADS, else the cores this process may "
         "use)")
      ->check(between(1, 1024));
}

}  // namespace qmoe::cli
