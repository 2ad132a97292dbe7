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
#include <cstdint>

#include "backend/cuda_wgmma/mxfp4_window_limit.hpp"
#include "backend/cuda_wgmma/token_tiles.hpp"
#include "cuda/limits.hpp"
#include "oracle/descriptor.hpp"
#include "oracle/forward_cost.hpp"

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
// padded (the descriptor requires whole tiles). Int4 codes without act-order are in the shared
// order (code_order.hpp); w13's only where w2 has no act-order either (whose channel order would
// reorder w13's rows).
PreparedBytes layer_bytes(const LayerDesc& l) {
  const int64_t E = l.num_experts, H = l.hidden, I = l.intermediate, N1 = l.w13_rows();
  auto plain_int4 = [](const QuantScheme& s) {
    return s.kind != WeightKind::mxfp4 && s.bits == 4 && !s.act_order;
  };
  const int64_t shared = (plain_int4(l.w2_scheme) ? E * H * I / 2 : 0) +
                         (plain_int4(l.w13_scheme) && plain_int4(l.w2_scheme) ? E * N1 * H / 2 : 0);
  return {kernel_weight_bytes(l.w13_scheme, E, N1, H) + kernel_weight_bytes(l.w2_scheme, E, H, I) +
              (l.w13_bias ? E * N1 * 4 : 0) + (l.w2_bias ? E * H * 4 : 0) +
              (l.w13_scheme.act_order ? E * H * 4 : 0),
          0, shared};
}

// The forward's time (BackendDescriptor::forward_us). Each tile (token_tiles.hpp) is one pass over
// its expert's weights, costing per million weights a term for the element the kernel reads and
// one per token of the tile (the tile is multiplied whole, however few of its rows are real). A
// weight with zero points adds its zero-term pass: per (row, group, output), per weight of all
// experts (the zero terms are read) and a fixed part (group sums and zero terms are launches of
// their own). Around the GEMMs a fixed part and one per (token, slot) row and channel. Weighted
// least-squares fit to 110 moe_bench rows on an H100 (the sweep of cuda-mma's model): median
// error 3%, worst 21% (bench/NOTES.md, "Crossover cost model").
//
// Microseconds per million weights of one pass by the element read, and per million weights per
// token of a tile.
struct PassUs {
  double int4, int8, e4m3;
};
constexpr PassUs kPassUs{0.168322, 0.256452, 0.247605};
constexpr double kTileTokenUs = 0.00177;
struct ZeroTermUs {
  double per_row_group_output;  // per million
  double per_weight;            // per million weights of all experts
  double fixed;
};
constexpr ZeroTermUs kZeroTermUs{0.150578, 0.021328, 24.563};
constexpr double kFixedUs = 74.19;
constexpr double kRowChannelUs = 3.669;  // per million (row, channel) of H + I

double pass_us_per_mweight(const QuantScheme& s) {
  if (s.kind == WeightKind::mxfp4) return kPassUs.e4m3;
  return s.bits == 8 ? kPassUs.int8 : kPassUs.int4;
}

double zero_term_us(const QuantScheme& s, int64_t E, int64_t rows, int64_t N, int64_t K) {
  if (!s.has_zero_points()) return 0;
  return kZeroTermUs.per_row_group_output * double(rows) * double(s.groups_for(K)) * double(N) /
             1e6 +
         kZeroTermUs.per_weight * double(E) * double(N) * double(K) / 1e6 + kZeroTermUs.fixed;
}

double forward_us(const LayerDesc& l, int64_t tokens) {
  const int64_t E = l.num_experts, pairs = tokens * l.top_k, H = l.hidden, I = l.intermediate,
                N1 = l.w13_rows();
  double tiles = 0, tile_tokens = 0;
  for (int i = 0; i < cuda_wgmma::kLaunches; ++i) {
    const double n = expected_sum_over_experts(
        pairs, E, [i](int64_t rows) { return double(cuda_wgmma::expert_tiles(rows).count[i]); });
    tiles += n;
    tile_tokens += n * cuda_wgmma::kTileTokens[i];
  }
  const double w13 = double(N1) * double(H) / 1e6, w2 = double(H) * double(I) / 1e6;
  const double passes =
      tiles * (w13 * pass_us_per_mweight(l.w13_scheme) + w2 * pass_us_per_mweight(l.w2_scheme));
  const double row_channels = double(pairs) * double(H + I) / 1e6;
  return kFixedUs + passes + tile_tokens * (w13 + w2) * kTileTokenUs +
         zero_term_us(l.w13_scheme, E, pairs, N1, H) + zero_term_us(l.w2_scheme, E, pairs, H, I) +
         kRowChannelUs * row_channels;
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
    // CUTLASS addresses one expert's codes through a cute layout of int strides: its element
    // offsets (nibbles for int4) must stay below 2^31.
    b.max_gemm_weights = INT32_MAX;
    b.n_multiple = 16;
    b.k_multiple = 64;
    b.group_multiple_of_k_tile = true;
    // Prefill partner of cuda-mma, from where the two cost models cross.
    b.large_batch_partner = true;
    b.forward_us = forward_us;
    b.prepared_bytes = layer_bytes;
    return b;
  }();
  return d;
}

}  // namespace qmoe
