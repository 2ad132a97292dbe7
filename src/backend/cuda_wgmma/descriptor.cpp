// What `cuda-wgmma` will run (src/backend/cuda_wgmma/): Hopper prefill with mixed-input wgmma,
// TMA and warp specialisation. wgmma is an sm_90a instruction, so compute capability 9.0 exactly.
// The kernel does not exist yet; the rest states its intended scope.
#include "oracle/descriptor.hpp"

namespace qmoe {

const BackendDescriptor& cuda_wgmma_descriptor() {
  static const BackendDescriptor d = [] {
    BackendDescriptor b;
    b.name = "cuda-wgmma";
    b.summary = "CUDA sm_90a prefill: mixed-input wgmma grouped GEMM (TMA, warp specialised)";
    b.unavailable = "kernel not written yet";
    b.build_hint = "this qmoe was built without CUDA; configure where nvcc is found";
    b.device = DeviceKind::cuda;
    b.min_compute_capability = 90;
    b.max_compute_capability = 90;
    b.int_bits = {4, 8};
    b.zero_points = true;
    b.group_sizes = {kChannelwise, 64, 128};
    b.activations = all_activations();
    b.activation_dtypes = {DType::bf16, DType::f16};
    b.bias = true;
    b.n_multiple = 128;
    b.k_multiple = 64;
    b.group_multiple_of_k_tile = true;
    return b;
  }();
  return d;
}

}  // namespace qmoe
