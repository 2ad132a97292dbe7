// AWQ (AutoAWQ "gemm" format), int4 only, per projection of N outputs x K inputs
// (spec/vllm-wna16-moe.md §3.2; AutoAWQ awq/modules/linear/gemm.py `WQLinear_GEMM.from_linear`,
// awq/utils/packing_utils.py AWQ_ORDER / AWQ_REVERSE_ORDER):
//   qweight I32 [K, N/8]  packed along N with the AWQ interleave: code (n, k) is field
//                         kAwqSlotOf[n % 8] of qweight[k][n / 8] (fields 0..7 hold columns
//                         0, 2, 4, 6, 1, 3, 5, 7 of the group of eight)
//   qzeros  I32 [G, N/8]  same interleave; z stored exactly (no -1)
//   scales  F16 [G, N], bias [N] (optional). No g_idx: AWQ has no act-order.
// With zero_point false there are no qzeros and the zero is the implicit 8.
#include "core/check.hpp"
#include "format/adapter.hpp"
#include "format/tensor_read.hpp"

namespace qmoe::format {

namespace {

class AwqAdapter final : public FormatAdapter {
 public:
  std::string_view packed_suffix() const override { return "qweight"; }
  std::string_view scales_suffix() const override { return "scales"; }

  static void check_scheme(const ProjectionSpec& spec) {
    check(spec.scheme.bits == 4 && !spec.scheme.act_order,
          "{}: AWQ gemm holds int4 without act-order, not {}", spec.module, to_string(spec.scheme));
    check_group_divides(spec);
    check(spec.N % 8 == 0,
          "{}: AWQ packs 8 output channels per int32, so N = {} must be a "
          "multiple of 8",
          spec.module, spec.N);
  }

  Projection read(const TensorStore& store, const ProjectionSpec& spec) const override {
    check_scheme(spec);
    const int64_t N = spec.N, K = spec.K, G = spec.scheme.groups_for(K);
    Projection p;
    const TensorInfo& qweight = store.at(spec.module + ".qweight");
    expect_tensor(qweight, {StDType::i32}, {K, N / 8});
    p.codes = unpack_along_cols_transposed(qweight.bytes, K, N / 8, 4, kAwqSlotOf);
    p.scales = read_floats(store.at(spec.module + ".scales"), G, N).transposed();
    if (spec.scheme.has_zero_points()) {
      const TensorInfo& qzeros = store.at(spec.module + ".qzeros");
      expect_tensor(qzeros, {StDType::i32}, {G, N / 8});
      p.zeros = unpack_along_cols_transposed(qzeros.bytes, G, N / 8, 4, kAwqSlotOf);
    }
    p.bias = read_bias(store, spec);
    return p;
  }

  void write(SafetensorsWriter& out, const ProjectionSpec& spec, const Projection& p,
             const WriteOptions& options) const override {
    check_scheme(spec);
    const int64_t N = spec.N, K = spec.K, G = spec.scheme.groups_for(K);
    out.add<uint32_t>(spec.module + ".qweight", StDType::i32, {K, N / 8},
                      pack_along_cols(p.codes.transposed(), 4, kAwqSlotOf));
    if (spec.scheme.has_zero_points()) {
      out.add<uint32_t>(spec.module + ".qzeros", StDType::i32, {G, N / 8},
                        pack_along_cols(p.zeros.transposed(), 4, kAwqSlotOf));
    }
    add_floats(out, spec.module + ".scales", {G, N}, p.scales.transposed().values, options);
    add_bias(out, spec, p, options);
  }

  ordered_json quantization_config(const QuantScheme& s, const WriteOptions&) const override {
    return {{"quant_method", "awq"},
            {"bits", s.bits},
            {"group_size", s.group_size == kChannelwise ? -1 : s.group_size},
            {"zero_point", s.has_zero_points()},
            {"version", "gemm"},
            {"modules_to_not_convert", nullptr}};
  }
};

}  // namespace

const FormatAdapter& awq_adapter() {
  static const AwqAdapter adapter;
  return adapter;
}

}  // namespace qmoe::format
