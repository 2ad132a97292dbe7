#include "measure/gpu/timing.hpp"

#include <algorithm>
#include <vector>

#include "cuda/cuda_check.hpp"
#include "qmoe/error.hpp"

namespace qmoe::bench {

namespace {

// The graph of R forwards, or nullptr when capture failed (the failure is cleared).
cudaGraphExec_t capture(int R, const std::function<void(int, cudaStream_t)>& enqueue,
                        cudaStream_t stream) {
  QMOE_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  bool ok = true;
  try {
    for (int r = 0; r < R; ++r) enqueue(r, stream);
  } catch (const Error&) {
    ok = false;
  }
  cudaGraph_t graph = nullptr;
  ok = cudaStreamEndCapture(stream, &graph) == cudaSuccess && ok;
  cudaGraphExec_t exec = nullptr;
  if (ok) ok = cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess;
  if (graph) cudaGraphDestroy(graph);
  cudaGetLastError();
  return ok ? exec : nullptr;
}

double percentile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(q * static_cast<double>(v.size() - 1) + 0.5)];
}

}  // namespace

EventTimer::EventTimer() {
  QMOE_CUDA_CHECK(cudaEventCreate(&start_));
  QMOE_CUDA_CHECK(cudaEventCreate(&stop_));
}

EventTimer::~EventTimer() {
  cudaEventDestroy(start_);
  cudaEventDestroy(stop_);
}

double EventTimer::ms(cudaStream_t stream, const std::function<void()>& work) {
  QMOE_CUDA_CHECK(cudaEventRecord(start_, stream));
  work();
  QMOE_CUDA_CHECK(cudaEventRecord(stop_, stream));
  QMOE_CUDA_CHECK(cudaEventSynchronize(stop_));
  float ms = 0;
  QMOE_CUDA_CHECK(cudaEventElapsedTime(&ms, start_, stop_));
  return ms;
}

Timing time_forwards(int R, const std::function<void(int, cudaStream_t)>& enqueue,
                     cudaStream_t stream, double budget_ms) {
  for (int warm = 0; warm < 2; ++warm)
    for (int r = 0; r < R; ++r) enqueue(r, stream);
  QMOE_CUDA_CHECK(cudaStreamSynchronize(stream));

  Timing t;
  cudaGraphExec_t exec = capture(R, enqueue, stream);
  t.graph = exec != nullptr;
  auto run_all = [&] {
    if (exec) {
      QMOE_CUDA_CHECK(cudaGraphLaunch(exec, stream));
    } else {
      for (int r = 0; r < R; ++r) enqueue(r, stream);
    }
  };
  run_all();  // the graph's own first launch uploads it
  QMOE_CUDA_CHECK(cudaStreamSynchronize(stream));

  EventTimer timer;
  std::vector<double> per_forward_us;
  double spent_ms = 0;
  while ((spent_ms < budget_ms || per_forward_us.size() < 5) && per_forward_us.size() < 400) {
    const double ms = timer.ms(stream, run_all);
    spent_ms += ms;
    per_forward_us.push_back(1000.0 * ms / R);
  }
  if (exec) QMOE_CUDA_CHECK(cudaGraphExecDestroy(exec));
  t.samples = static_cast<int>(per_forward_us.size());
  t.median_us = percentile(per_forward_us, 0.5);
  t.p10_us = percentile(per_forward_us, 0.1);
  t.p90_us = percentile(per_forward_us, 0.9);
  return t;
}

}  // namespace qmoe::bench
