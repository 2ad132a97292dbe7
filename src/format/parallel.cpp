#include "format/parallel.hpp"

#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "qmoe/threads.hpp"

namespace qmoe::format {

void for_each_index(int64_t n, const std::function<void(int64_t)>& f) {
  const int64_t threads = std::clamp<int64_t>(usable_cpus(), 1, std::max<int64_t>(n, 1));
  std::atomic<int64_t> next{0};
  std::atomic<bool> failed{false};
  std::mutex mutex;
  int64_t first_failure = n;
  std::exception_ptr error;
  auto work = [&] {
    for (int64_t i = next++; i < n && !failed; i = next++) {
      try {
        f(i);
      } catch (...) {
        const std::lock_guard lock(mutex);
        if (i < first_failure) {
          first_failure = i;
          error = std::current_exception();
        }
        failed = true;
      }
    }
  };
  std::vector<std::thread> pool;
  for (int64_t t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (std::thread& t : pool) t.join();
  if (error) std::rethrow_exception(error);
}

}  // namespace qmoe::format
