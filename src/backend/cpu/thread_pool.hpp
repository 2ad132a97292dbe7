#pragma once
// The cpu backend's worker threads: created once, reused by every forward. A forward is a few
// parallel loops over flat work lists; each loop hands items out through one atomic counter, so
// a thread slowed by other load on the machine simply takes fewer items.
//
// A loop waits only for workers that actually joined it: on a busy machine a worker may not get
// a time slice for milliseconds, and a 1 ms decode step must not wait for it to show up just to
// find the work gone. The caller closes the loop once every item is taken; a worker that wakes
// later sees it closed and leaves without touching it.
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace qmoe::cpu {

class ThreadPool {
 public:
  // The process-wide pool. Its size is QMOE_CPU_THREADS when set, else usable_cpus()
  // (qmoe/threads.hpp); set_cpu_threads() resizes it.
  static ThreadPool& instance();

  explicit ThreadPool(int threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int threads() const { return static_cast<int>(workers_.size()) + 1; }  // the caller helps
  // Joins the workers and starts `threads - 1` new ones. Not for use while a loop runs.
  void resize(int threads);

  // Calls body(i) for every i in [0, n) on all threads and returns when all are done. The first
  // exception thrown by a body is rethrown here. Called from inside a body, it runs serially.
  void parallel_for(int64_t n, const std::function<void(int64_t)>& body);

 private:
  static constexpr uint64_t kClosed = uint64_t{1} << 63;

  void start(int threads);
  void stop();
  void worker_loop();
  void drain();

  std::vector<std::thread> workers_;
  std::mutex loop_mutex_;  // one parallel_for at a time

  std::mutex mutex_;  // guards generation_, stopping_, error_
  std::condition_variable wake_;
  uint64_t generation_ = 0;
  bool stopping_ = false;
  std::exception_ptr error_;

  const std::function<void(int64_t)>* body_ = nullptr;
  int64_t n_ = 0;
  std::atomic<int64_t> next_{0};
  std::atomic<uint64_t> joined_{kClosed};  // workers inside the loop, | kClosed once closed
  std::atomic<uint64_t> published_{0};     // generation_, readable without the mutex
};

// QMOE_CPU_THREADS, validated: a positive integer, or unset (0 means "unset").
int threads_from_environment();

}  // namespace qmoe::cpu
