#pragma once
// Timing of R back-to-back forwards (one per routing set, so weights do not stay in L2): a CUDA
// graph of the R forwards is replayed between two events, falling back to events around eager
// launches when the work cannot be captured. Samples are per forward (replay time / R).
#include <cuda_runtime_api.h>

#include <functional>

namespace qmoe::bench {

// Milliseconds of device time that `work` enqueues on `stream`, between two events.
class EventTimer {
 public:
  EventTimer();
  ~EventTimer();
  EventTimer(const EventTimer&) = delete;
  EventTimer& operator=(const EventTimer&) = delete;
  double ms(cudaStream_t stream, const std::function<void()>& work);

 private:
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
};

struct Timing {
  double median_us = 0, p10_us = 0, p90_us = 0;
  int samples = 0;
  bool graph = false;  // false: eager launches (the work could not be captured)
};

// enqueue(set, stream) enqueues one forward on routing set `set` in 0..R-1. Warm-up first, then
// samples until about budget_ms of replays (at least 5, at most 400).
Timing time_forwards(int R, const std::function<void(int, cudaStream_t)>& enqueue,
                     cudaStream_t stream, double budget_ms);

}  // namespace qmoe::bench
