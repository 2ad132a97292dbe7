// What `cuda-mma` runs (src/backend/cuda_mma/): tensor-core mma.sync (m16n8k16) with in-register
// dequantization of int4/int8 codes and MXFP4's e2m1, sm_80 and newer. The layout (layout.hpp) pads
// N to 16-row strips and K to whole 16-byte chunks itself, so any N and K the canonical form holds
// are fine; a 32-k span must lie in one group, so groups are channelwise or multiples of 32.
// Act-order with a K-split shard works (groups come from g_idx). Owner: edit these numbers with the
// kernel.
#include <algorithm>

#include "cuda/limits.hpp"
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
    b.mxfp4 = true;
    b.zero_points = true;
    b.group_sizes = {kChannelwise, kAnyGroupDividingK};
    b.group_multiple = 32;
    b.act_order = true;
    b.act_order_uneven_groups = true;
    b.act_order_split_k = true;
    b.activations = all_activations();
    b.activation_dtypes = {DType::bf16, DType::f16};
    b.bias = true;
    b.router_weight_on_input = true;
    // What the shared GPU routing and alignment take.
    b.max_experts = std::min(kMaxRoutingExperts, kMaxAlignExperts);
    b.max_top_k = kMaxRoutingTopK;
    return b;
  }();
  return d;
}

}  // namespace qmoe
