// Timings of the C++ call itself, for bench/python/overhead.py: the same MoE::forward the Python
// wrappers reach, called in a C++ loop, so the difference to a Python loop is Python's overhead.
#include <nanobind/nanobind.h>
#include <nanobind/stl/pair.h>

#include <chrono>
#include <cstdint>

#include "bindings.hpp"
#include "core/check.hpp"
#include "qmoe/moe.hpp"
#include "tensor_args.hpp"
#ifdef QMOE_WITH_CUDA
#include <cuda_runtime_api.h>

#include "cuda/cuda_check.hpp"
#endif

namespace nb = nanobind;

namespace qmoe::python {

namespace {

// Host seconds per forward over `calls` forwards enqueued back to back (no synchronisation).
double host_seconds_per_forward(const MoE& moe, const nb::tuple& x, const nb::tuple& logits,
                                const nb::tuple& out, uintptr_t stream, int calls) {
  const TensorView vx = view_of(x, "x"), vl = view_of(logits, "router_logits"),
                   vo = view_of(out, "out");
  void* s = reinterpret_cast<void*>(stream);
  nb::gil_scoped_release release;
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < calls; ++i) moe.forward(vx, vl, vo, s);
  const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
  return elapsed.count() / calls;
}

// GPU milliseconds per forward of a CUDA graph of `per_graph` forwards captured from C++,
// replayed `replays` times (after one warm-up replay).
double graph_ms_per_forward(const MoE& moe, const nb::tuple& x, const nb::tuple& logits,
                            const nb::tuple& out, uintptr_t stream, int per_graph, int replays) {
#ifdef QMOE_WITH_CUDA
  const TensorView vx = view_of(x, "x"), vl = view_of(logits, "router_logits"),
                   vo = view_of(out, "out");
  auto s = reinterpret_cast<cudaStream_t>(stream);
  check(s != nullptr, "graph timing needs a non-default stream");
  nb::gil_scoped_release release;
  moe.reserve(vx.dim(0), s);
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  QMOE_CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  for (int i = 0; i < per_graph; ++i) moe.forward(vx, vl, vo, s);
  QMOE_CUDA_CHECK(cudaStreamEndCapture(s, &graph));
  QMOE_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  cudaEvent_t begin = nullptr, end = nullptr;
  QMOE_CUDA_CHECK(cudaEventCreate(&begin));
  QMOE_CUDA_CHECK(cudaEventCreate(&end));
  QMOE_CUDA_CHECK(cudaGraphLaunch(exec, s));
  QMOE_CUDA_CHECK(cudaEventRecord(begin, s));
  for (int r = 0; r < replays; ++r) QMOE_CUDA_CHECK(cudaGraphLaunch(exec, s));
  QMOE_CUDA_CHECK(cudaEventRecord(end, s));
  QMOE_CUDA_CHECK(cudaEventSynchronize(end));
  float ms = 0;
  QMOE_CUDA_CHECK(cudaEventElapsedTime(&ms, begin, end));
  cudaEventDestroy(begin);
  cudaEventDestroy(end);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  return double(ms) / (double(replays) * per_graph);
#else
  (void)moe, (void)x, (void)logits, (void)out, (void)stream, (void)per_graph, (void)replays;
  fail("graph timing needs qmoe built with its CUDA backends");
#endif
}

}  // namespace

void bind_bench(nb::module_& m) {
  m.def("_bench_host_seconds_per_forward", &host_seconds_per_forward, nb::arg("moe"), nb::arg("x"),
        nb::arg("router_logits"), nb::arg("out"), nb::arg("stream"), nb::arg("calls"));
  m.def("_bench_graph_ms_per_forward", &graph_ms_per_forward, nb::arg("moe"), nb::arg("x"),
        nb::arg("router_logits"), nb::arg("out"), nb::arg("stream"), nb::arg("per_graph"),
        nb::arg("replays"));
}

}  // namespace qmoe::python
