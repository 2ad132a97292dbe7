// What `cuda-wgmma` runs (src/backend/cuda_wgmma/): Hopper prefill on CUTLASS's mixed-input
// grouped GEMM (wgmma, TMA, warp specialisation). wgmma is an sm_90a instruction, so compute
// capability 9.0 exactly. The mainloop reads one scale (and zero) per 64-wide K tile, so groups
// are channelwise or whole K tiles, and K is whole tiles; MXFP4's 32-blocks are re-coded as fp8
// at one scale per tile, exact while the two blocks' scales are at most 2^14 apart
// (mxfp4_recode.hpp); TMA needs 16-byte rows (N a multiple of
// 8) and the shuffled 4-bit order tiles N by 16. Act-order sorts each expert's K by group
// (kernel_weight.hpp): GEMM1's rows are gathered in that order and w13's rows are permuted so that
// GEMM2's input comes out in w2's order; that needs every group to hold exactly group-size
// channels and the whole K (no K-split shards), which cuda-mma runs instead. Owner: edit these
// numbers with the kernel.
#include <algorithm>

#include "backend/cuda_wgmma/mxfp4_window_limit.hpp"
#include "cuda/limits.hpp"
#include "oracle/descriptor.hpp"

namespace qmoe {

namespace {

// What kernel_weight.cpp uploads for one weight [E, N, K]: codes, 16-bit scales and, with zero
// points, f32 zero terms per (group, row). MXFP4 becomes one e4m3 byte per weight and one scale
// per 64-channel window.
int64_t kernel_weight_bytes(const QuantScheme& s, int64_t E, int64_t N, int64_t K) {
  if (s.kind == WeightKind::mxfp4) return E * N * K + E * (K / 64) * N * 2;
  return E * N * K * s.bits / 8 + E * s.groups_for(K) * N * (2 + (s.has_zero_points() ? 4 : 0));
}

// Both weights, the f32 biases and, with act-order on w13, its int32 channel order; nothing is
// padded (the descriptor requires whole tiles).
PreparedBytes layer_bytes(const LayerDesc& l) {
  const int64_t E = l.num_experts, H = l.hidden, N1 = l.w13_rows();
  return {kernel_weight_bytes(l.w13_scheme, E, N1, H) +
              kernel_weight_bytes(l.w2_scheme, E, H, l.intermediate) +
              (l.w13_bias ? E * N1 * 4 : 0) + (l.w2_bias ? E * H * 4 : 0) +
              (l.w13_scheme.act_order ? E * H * 4 : 0),
          0};
}

}  // namespace

const BackendDescriptor& cuda_wgmma_descriptor() {
  static const BackendDescriptor d = [] {
    BackendDescriptor b;
    b.name = "cuda-wgmma";
    b.summary =
        "CUDA sm_90a prefill: CUTLASS mixed-input wgmma grouped GEMM (TMA, warp specialised)";
    b.build_hint =
        "built without CUDA for sm_90a or without CUTLASS's headers (scripts/fetch-cutlass.sh)";
    b.device = DeviceKind::cuda;
    b.min_compute_capability = 90;
    b.max_compute_capability = 90;
    b.int_bits = {4, 8};
    b.mxfp4 = true;
    b.mxfp4_window_spread_limit = cuda_wgmma::kMxfp4WindowSpreadLimit;
    b.zero_points = true;
    b.group_sizes = {kChannelwise, kAnyGroupDividingK};
    b.act_order = true;
    b.group_multiple = 64;
    b.activations = all_activations();
    b.activation_dtypes = {DType::bf16, DType::f16};
    b.bias = true;
    b.router_weight_on_input = true;
    // What the shared GPU routing and alignment take.
    b.max_experts = std::min(kMaxRoutingExperts, kMaxAlignExperts);
    b.max_top_k = kMaxRoutingTopK;
    b.n_multiple = 16;
    b.k_multiple = 64;
    b.group_multiple_of_k_tile = true;
    // Prefill partner of cuda-mma. Measured on the H200 (`qmoe tune`, int4 g128): cuda-wgmma is
    // faster from 64 rows per expert on Mixtral, 40 on Qwen3-30B-A3B and 48 on DeepSeek-V3; from
    // 48 on, the kernel it picks is the faster one or within 1% of it on all three.
    b.large_batch_rows_per_expert = 48;
    b.prepared_bytes = layer_bytes;
    return b;
  }();
  return d;
}

}  // namespace qmoe
