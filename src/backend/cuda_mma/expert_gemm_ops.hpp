#pragma once
// The compiled kernels of the expert GEMM, one instantiation unit per Variant (generated from
// expert_gemm_instance.cu.in, see CMakeLists.txt), and the table that finds a variant's unit.
#include <cuda_runtime_api.h>

#include "backend/cuda_mma/expert_gemm.hpp"

namespace qmoe::cuda_mma {

// What each variant's unit provides.
struct GemmOps {
  // launch_expert_gemm for this variant (refuses plans its kernels cannot run).
  cudaError_t (*launch)(const GemmProblem& problem, const GemmPlan& plan, cudaStream_t stream);
  // The CTAs of the instance of (tile rows, activations shared or not, strip run) that fit on one
  // SM of the current device, once it is opted into the shared memory it needs; 0 where it cannot
  // run there.
  int (*ctas_per_sm)(int tile_rows, bool shared, int run);
};

// nullptr when this build has no such variant.
const GemmOps* gemm_ops(const Variant& v);

}  // namespace qmoe::cuda_mma
