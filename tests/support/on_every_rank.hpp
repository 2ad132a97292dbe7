#pragma once
// Runs f(rank) on one thread per rank, as in-process ranks of a sharded layer run, and rethrows
// the first rank's exception once every thread has joined.
#include <exception>
#include <functional>
#include <thread>
#include <vector>

namespace qmoe::test {

inline void on_every_rank(int ranks, const std::function<void(int)>& f) {
  std::vector<std::exception_ptr> errors(static_cast<size_t>(ranks));
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r)
    threads.emplace_back([&, r] {
      try {
        f(r);
      } catch (...) {
        errors[size_t(r)] = std::current_exception();
      }
    });
  for (std::thread& t : threads) t.join();
  for (const std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);
}

}  // namespace qmoe::test
