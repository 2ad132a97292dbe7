// What `cuda-mma` runs (src/backend/cuda_mma/): tensor-core mma.sync (m16n8k16) with in-register
// dequantization of int4/int8 codes and MXFP4's e2m1, sm_80 and newer. The layout (layout.hpp) pads
// N to 16-row strips and K to whole 16-byte chunks itself, so any N and K the canonical form holds
// are fine; a 32-k span must lie in one group, so groups are channelwise or multiples of 32.
// Act-order with a K-split shard works (groups come from g_idx). Owner: edit these numbers with the
// kernel.
#include <algorithm>

#include "core/round_up.hpp"
#include "cuda/limits.hpp"
#include "oracle/descriptor.hpp"

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
  return {total, codes - E * N * K * bits / 8};
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
  return {w13.total + w2.total, w13.padding + w2.padding};
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
    return b;
  }();
  return d;
}

}  // namespace qmoe
