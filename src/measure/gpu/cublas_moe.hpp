#pragma once
// The same-run baseline: the MoE forward in bf16 on cuBLAS with dequantized weights. Rows are
// gathered by expert (from the set's alignment), one cuBLAS GEMM per active expert for w13 and
// for w2 (fp32 accumulation), then qmoe's activation and combine kernels.
#include <cublas_v2.h>

#include "measure/gpu/workload.hpp"

namespace qmoe::bench {

class CublasMoE {
 public:
  // w13_bf16 [E, 2I, H], w2_bf16 [E, H, I] (kept by the caller). Scratch sized for
  // max_pairs = M*k rows; allocated once, here.
  CublasMoE(cublasHandle_t handle, const Shape& shape, const DeviceBuffer& w13_bf16,
            const DeviceBuffer& w2_bf16, int64_t max_pairs);
  // out: bf16 [M, H]. Enqueues only (graph-capturable): the per-expert row counts come from the
  // set's host copy of its alignment.
  void forward(const RoutingSet& set, uint16_t* out, cudaStream_t stream) const;

 private:
  cublasHandle_t handle_;
  Shape shape_;
  const DeviceBuffer &w13_, &w2_;
  DeviceBuffer rows_, gate_up_, act_, down_, cublas_workspace_;
};

}  // namespace qmoe::bench
