// What `cuda-mma` runs (src/backend/cuda_mma/): tensor-core mma.sync (m16n8k16) with in-register
// dequantization, sm_80 and newer. Tile multiples: a K step is 16 and one tile reads one scale
// per group, so groups cover whole K steps; N is cut in 64-row tiles. Owner: edit these numbers
// with the kernel.
#include "oracle/descriptor.hpp"

namespace qmoe {

const BackendDescriptor& cuda_mma_descriptor() {
  static const BackendDescriptor d = [] {
    BackendDescriptor b;
    b.name = "cuda-mma";
    b.summary = "CUDA sm_80+: mma.sync grouped GEMM, one launch over a flat work list";
    b.build_hint = "this qmoe was built without CUDA; configure where nvcc is found";
    b.device = DeviceKind::cuda;
    b.min_compute_capability = 80;
    b.int_bits = {4, 8};
    b.zero_points = true;
    b.group_sizes = {kChannelwise, 32, 64, 128};
    b.act_order = true;
    b.activations = all_activations();
    b.activation_dtypes = {DType::bf16, DType::f16};
    b.bias = true;
    b.router_weight_on_input = true;
    b.n_multiple = 64;
    b.k_multiple = 16;
    b.group_multiple_of_k_tile = true;
    return b;
  }();
  return d;
}

}  // namespace qmoe
