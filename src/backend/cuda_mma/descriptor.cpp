// What `cuda-mma` runs (src/backend/cuda_mma/): tensor-core mma.sync (m16n8k16) with in-register
// dequantization of int4/int8 codes and MXFP4's e2m1, sm_80 and newer. The layout (layout.hpp) pads
// N to 16-row strips and K to whole 16-byte chunks itself, so any N and K the canonical form holds
// are fine; a 32-k span must lie in one group, so groups are channelwise or multiples of 32.
// Act-order with a K-split shard works (groups come from g_idx). Owner: edit these numbers with the
// kernel.
#include <algorithm>
#include <array>
#include <utility>

#include "backend/cuda_mma/tile_choice.hpp"
#include "core/round_up.hpp"
#include "cuda/limits.hpp"
#include "oracle/descriptor.hpp"
#include "oracle/forward_cost.hpp"

namespace qmoe {

namespace {

// One weight [E, N, K] in the layout of layout.hpp: `rows` packed rows (whole 16-row strips),
// codes over K padded to whole 16-byte chunks (64 k of 4-bit codes, 32 of 8-bit), a 32-bit scale
// pair and (asymmetric) a 16-bit zero pair per (strip, group, row pair) plus two groups of
// padding, `bias_rows` f32 biases, and with act-order the channel order and span groups. An
// act-order layer whose groups are not whole spans pads more than this counts.
PreparedBytes weight_bytes(const QuantScheme& s, int64_t E, int64_t N, int64_t rows, int64_t K,
                           int64_t scale_K, int64_t bias_rows) {
  const int64_t bits = s.kind == WeightKind::mxfp4 ? 4 : s.bits;
  const int64_t K_pad = round_up(K, bits == 4 ? 64 : 32);
  const int64_t strips = rows / 16, pairs = (E * strips * s.groups_for(scale_K) + 2) * 8;
  const int64_t codes = E * rows * K_pad * bits / 8;
  int64_t total = codes + pairs * 4 + (s.has_zero_points() ? pairs * 2 : 0);
  total += E * bias_rows * 4;
  if (s.act_order) total += E * K_pad * 4 + E * (K_pad / 32) * 4;
  const bool plain_int4 = s.kind != WeightKind::mxfp4 && bits == 4 && !s.act_order;
  return {total, codes - E * N * K * bits / 8, plain_int4 ? codes : 0};
}

// w13 of a gated activation packs 8 gate and 8 up rows per strip (repack.hpp), its biases in
// that packed order; other weights keep their N rows (and biases), padded to strips in the codes.
PreparedBytes layer_bytes(const LayerDesc& l) {
  const int64_t E = l.num_experts, H = l.hidden, I = l.intermediate, N1 = l.w13_rows();
  const bool gated = is_gated(l.activation);
  const int64_t rows1 = gated ? round_up(I, 8) * 2 : round_up(N1, 16);
  const PreparedBytes w13 =
      weight_bytes(l.w13_scheme, E, N1, rows1, H, H, l.w13_bias ? (gated ? rows1 : N1) : 0);
  const PreparedBytes w2 = weight_bytes(l.w2_scheme, E, H, round_up(H, 16), I,
                                        l.w2_full_k > 0 ? l.w2_full_k : I, l.w2_bias ? H : 0);
  return {w13.total + w2.total, w13.padding + w2.padding,
          w13.shared_int4_codes + w2.shared_int4_codes};
}

// The forward's time (BackendDescriptor::forward_us). Each tile of T rows is one pass over its
// expert's weights (codes streamed and dequantized again; T from choose_tile_rows, before
// fitting_tile_rows may lower it for a layer whose kernels do not fit it), costing per
// million weights a term for the weight element and one for the tile height (8-bit codes have
// their own: their tall tiles run fewer CTAs per SM); around the GEMMs a fixed part (routing,
// alignment, launches) and one per (token, slot) row and channel (gathers, activation, combine).
// Weighted least-squares fit to 123 moe_bench rows on an H100 (int4 g128 with and without zero
// points, int8 g128, MXFP4; Mixtral, Qwen3-30B-A3B, DeepSeek-V3, gpt-oss; 8 to 192 rows per
// expert): median error 3%, worst 13% (bench/NOTES.md, "Crossover cost model"). Group sizes are
// not a term: only groups of 64 and more (and channelwise) have a partner to cross over to, and
// there the scales are at most 6% of the bytes.
//
// Microseconds per million weights of one pass: an 8-row tile's cost by element (zero points add
// to the integer codes'), and what a taller tile adds to it.
struct PassUs {
  double int4, int8, zero_points, e2m1;
};
constexpr PassUs kPassUs{0.171124, 0.325277, 0.004608, 0.271163};
using TileUs = std::array<std::pair<int, double>, 5>;
constexpr TileUs kTileUs = {
    {{8, 0.0}, {16, 0.05404}, {32, 0.042021}, {48, 0.102374}, {64, 0.242141}}};
constexpr TileUs kInt8TileUs = {
    {{8, 0.0}, {16, 0.025814}, {32, 0.20409}, {48, 0.297729}, {64, 0.307793}}};
constexpr double kFixedUs = 32.07;
constexpr double kRowChannelUs = 5.081;  // per million (row, channel) of H + I

double pass_us_per_mweight(const QuantScheme& s, int tile_rows) {
  const bool int8 = s.kind == WeightKind::integer && s.bits == 8;
  double tile_us = 0;
  for (const auto& [rows, us] : int8 ? kInt8TileUs : kTileUs)
    if (rows == tile_rows) tile_us = us;
  if (s.kind == WeightKind::mxfp4) return kPassUs.e2m1 + tile_us;
  return (int8 ? kPassUs.int8 : kPassUs.int4) + (s.has_zero_points() ? kPassUs.zero_points : 0) +
         tile_us;
}

double forward_us(const LayerDesc& l, int64_t tokens) {
  const int tile = cuda_mma::choose_tile_rows(tokens, l.top_k, l.num_experts);
  const double tiles =
      expected_sum_over_experts(tokens * l.top_k, l.num_experts,
                                [tile](int64_t rows) { return double((rows + tile - 1) / tile); });
  const double w13 = double(l.w13_rows()) * double(l.hidden) / 1e6;
  const double w2 = double(l.hidden) * double(l.intermediate) / 1e6;
  const double pass =
      w13 * pass_us_per_mweight(l.w13_scheme, tile) + w2 * pass_us_per_mweight(l.w2_scheme, tile);
  const double row_channels = double(tokens * l.top_k) * double(l.hidden + l.intermediate) / 1e6;
  return kFixedUs + tiles * pass + kRowChannelUs * row_channels;
}

}  // namespace

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
    b.activation_formats = {ActivationFormat::standard, ActivationFormat::batched_experts};
    // What the shared GPU routing and alignment take.
    b.max_experts = std::min(kMaxRoutingExperts, kMaxAlignExperts);
    b.max_top_k = kMaxRoutingTopK;
    b.prepared_bytes = layer_bytes;
    b.forward_us = forward_us;
    return b;
  }();
  return d;
}

}  // namespace qmoe
