// What the `cpu` backend runs (src/backend/cpu/): int4/int8 and MXFP4 panels dequantized on the
// fly (MXFP4: e2m1 codes through a lookup table, e8m0 scales as f32 powers of two), AVX-512
// or AVX2+FMA chosen at run time with a portable fallback, so x86-64 is the only requirement.
// Group sizes: any divisor of K whose codes fill whole bytes (even groups for int4, any group for
// int8). Act-order becomes a permutation of K at
// prepare, which needs groups of equal size, so a K-split act-order shard is not supported.
#include "oracle/descriptor.hpp"
#include "core/round_up.hpp"

namespace qmoe {

namespace {

// One weight [E, N, K] in panels of 32 rows (panel_format.hpp): per group a header (f32 scales
// and u8 zero points, or MXFP4's e8m0 bytes) and the codes; f32 biases per packed row and, with
// act-order, an i32 channel order. K is never padded; N is padded to whole panels.
PreparedBytes weight_bytes(const QuantScheme& s, int64_t E, int64_t N, int64_t rows, int64_t K,
                           bool bias) {
  const bool mxfp4 = s.kind == WeightKind::mxfp4;
  const int64_t bits = mxfp4 ? 4 : s.bits, groups = s.groups_for(K);
  const int64_t header = mxfp4 ? 32 : 32 * 4 + (s.has_zero_points() ? 32 : 0);
  const int64_t codes = E * rows * K * bits / 8;
  int64_t total = codes + E * (rows / 32) * groups * header;
  if (bias) total += E * rows * 4;
  if (s.act_order) total += E * K * 4;
  return {total, codes - E * N * K * bits / 8};
}

// w13 of a gated activation pairs 16 gate and 16 up rows per panel (cpu_backend.cpp); an
// act-order w2 also keeps where each intermediate channel sits in its packed K (i32 [E, I]).
PreparedBytes layer_bytes(const LayerDesc& l) {
  const int64_t E = l.num_experts, H = l.hidden, I = l.intermediate, N1 = l.w13_rows();
  const int64_t rows1 = is_gated(l.activation) ? round_up(I, 16) * 2 : round_up(N1, 32);
  const PreparedBytes w13 = weight_bytes(l.w13_scheme, E, N1, rows1, H, l.w13_bias);
  const PreparedBytes w2 = weight_bytes(l.w2_scheme, E, H, round_up(H, 32), I, l.w2_bias);
  const int64_t w2_position = l.w2_scheme.act_order ? E * I * 4 : 0;
  return {w13.total + w2.total + w2_position, w13.padding + w2.padding};
}

}  // namespace

const BackendDescriptor& cpu_descriptor() {
  static const BackendDescriptor d = [] {
    BackendDescriptor b;
    b.name = "cpu";
    b.summary = "x86-64: threads + AVX-512 / AVX2+FMA (portable fallback), dequant on the fly";
    b.build_hint = "its sources are not in this build";
    b.device = DeviceKind::cpu;
    b.cpu_features = {CpuFeature::x86_64};
    b.int_bits = {4, 8};
    b.mxfp4 = true;
    b.zero_points = true;
    b.group_sizes = {kChannelwise, kAnyGroupDividingK};
    b.group_fills_whole_bytes = true;
    b.act_order = true;
    b.activations = all_activations();
    b.activation_dtypes = {DType::f32, DType::f16, DType::bf16};
    b.bias = true;
    b.router_weight_on_input = true;
    b.activation_formats = {ActivationFormat::standard, ActivationFormat::batched_experts};
    b.prepared_bytes = layer_bytes;
    return b;
  }();
  return d;
}

}  // namespace qmoe
