#include "backend/cpu/thread_pool.hpp"

#include <algorithm>
#include <cstdlib>
#include <string>
#include <utility>

#include "core/check.hpp"
#include "qmoe/threads.hpp"

namespace qmoe::cpu {

namespace {
thread_local bool inside_loop = false;

// Workers spin this many times before sleeping: a decode forward is a few hundred microseconds,
// and waking a sleeping thread costs tens of them.
constexpr int kSpins = 20000;

inline void spin_pause() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}
}  // namespace

int threads_from_environment() {
  const char* s = std::getenv("QMOE_CPU_THREADS");
  if (!s || !*s) return 0;
  char* end = nullptr;
  const long n = std::strtol(s, &end, 10);
  check(*end == '\0' && n > 0 && n <= 1024,
        "QMOE_CPU_THREADS={} is not a thread count (valid: an integer 1..1024)", s);
  return static_cast<int>(n);
}

ThreadPool& ThreadPool::instance() {
  static ThreadPool pool([] {
    const int from_env = threads_from_environment();
    return from_env > 0 ? from_env : usable_cpus();
  }());
  return pool;
}

ThreadPool::ThreadPool(int threads) { start(threads); }
ThreadPool::~ThreadPool() { stop(); }

void ThreadPool::resize(int threads) {
  check(threads > 0, "thread count must be positive, got {}", threads);
  std::lock_guard loop(loop_mutex_);
  stop();
  start(threads);
}

void ThreadPool::start(int threads) {
  stopping_ = false;
  for (int i = 1; i < threads; ++i) workers_.emplace_back([this] { worker_loop(); });
}

void ThreadPool::stop() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
    ++generation_;
    published_.store(generation_, std::memory_order_release);
  }
  wake_.notify_all();
  for (std::thread& t : workers_) t.join();
  workers_.clear();
}

void ThreadPool::drain() {
  inside_loop = true;
  for (int64_t i; (i = next_.fetch_add(1, std::memory_order_relaxed)) < n_;) {
    try {
      (*body_)(i);
    } catch (...) {
      std::lock_guard lock(mutex_);
      if (!error_) error_ = std::current_exception();
      next_.store(n_, std::memory_order_relaxed);
    }
  }
  inside_loop = false;
}

void ThreadPool::worker_loop() {
  uint64_t seen = 0;
  for (;;) {
    for (int spin = 0; spin < kSpins && published_.load(std::memory_order_acquire) == seen; ++spin)
      spin_pause();
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [&] { return generation_ != seen; });
      seen = generation_;
      if (stopping_) return;
    }
    // Join whatever loop is open now (possibly a later one than the wake-up was for: its items
    // are as good). A closed loop is left alone, without even a transient count.
    uint64_t joined = joined_.load(std::memory_order_acquire);
    while (!(joined & kClosed) &&
           !joined_.compare_exchange_weak(joined, joined + 1, std::memory_order_acq_rel,
                                          std::memory_order_acquire)) {
    }
    if (joined & kClosed) continue;
    drain();
    joined_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

void ThreadPool::parallel_for(int64_t n, const std::function<void(int64_t)>& body) {
  if (n <= 0) return;
  if (inside_loop || workers_.empty() || n == 1) {
    for (int64_t i = 0; i < n; ++i) body(i);
    return;
  }
  std::lock_guard loop(loop_mutex_);
  body_ = &body;
  n_ = n;
  next_.store(0, std::memory_order_relaxed);
  error_ = nullptr;
  joined_.store(0, std::memory_order_release);  // open: publishes body_, n_ and next_
  {
    std::lock_guard lock(mutex_);
    ++generation_;
    published_.store(generation_, std::memory_order_release);
  }
  wake_.notify_all();
  drain();
  // Every item is taken; wait for the workers still running one.
  for (uint64_t inside = joined_.fetch_or(kClosed, std::memory_order_acq_rel) & ~kClosed;
       inside != 0; inside = joined_.load(std::memory_order_acquire) & ~kClosed)
    std::this_thread::yield();
  body_ = nullptr;
  std::lock_guard lock(mutex_);
  if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
}

}  // namespace qmoe::cpu

namespace qmoe {

int cpu_threads() { return cpu::ThreadPool::instance().threads(); }

void set_cpu_threads(int threads) {
  check(threads >= 1 && threads <= 1024,
        "set_cpu_threads: {} is not a thread count (valid: 1..1024)", threads);
  cpu::ThreadPool& pool = cpu::ThreadPool::instance();
  if (pool.threads() != threads) pool.resize(threads);
}

}  // namespace qmoe
