#pragma once
// --threads N, on every command that runs forwards: the cpu backend's thread count
// (qmoe::set_cpu_threads). Without it: QMOE_CPU_THREADS, else the cores this process may use.
#include <CLI/CLI.hpp>

namespace qmoe::cli {

void add_threads_flag(CLI::App& cmd);

}  // namespace qmoe::cli
