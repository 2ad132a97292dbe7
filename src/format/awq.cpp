// AWQ (AutoAWQ "gemm" format), int4 only, per projection of N outputs x K inputs (AutoAWQ
// awq/modules/linear/gemm.py `WQLinear_GEMM.from_linear`, awq/utils/packing_utils.py AWQ_ORDER /
// AWQ_REVERSE_ORDER):
//   qweight I32 [K, N/8]  packed along N with the AWQ interleave: code (n, k) is field
//                         kAwqSlotOf[n % 8] of qweight[k][n / 8] (fields 0..7 hold columns
//                         0, 2, 4, 6, 1, 3, 5, 7 of the group of eight)
//   qzeros  I32 [G, N/8]  same interleave; z stored exactly (no -1)
//   scales  F16 [G, N], bias [N] (optional). No g_idx: AWQ has no act-order.
// With zero_point false there are no qzeros and the zero is the implicit 8.
// quantization_config: bits | w_bit, group_size | q_group_size, zero_point, version,
// modules_to_not_convert.
#include "core/check.hpp"
#include "format/adapter.hpp"
#include "format/json_fields.hpp"
#include "format/quant_method.hpp"
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

  std::vector<TensorPart> parts(const TensorStore& store,
                                const ProjectionSpec& spec) const override {
    check_scheme(spec);
    spec.check_cut(8, 1, "AWQ packs 8 output channels per int32");
    // qweight [K, N/8]: a K cut takes whole rows, an N cut words of every row. scales [G, N] and
    // qzeros [G, N/8]: the groups' rows, the output channels' columns (words of them).
    const int64_t N = spec.N, K = spec.K, G = spec.scheme.groups_for(K);
    const Range n = spec.rows(), k = spec.cols(), g = spec.groups(),
                words{n.first / 8, n.count / 8};
    const std::string& m = spec.module;
    std::vector<TensorPart> parts{block_part(m + ".qweight", {StDType::i32}, K, N / 8, k, words),
                                  block_part(m + ".scales", kFloatDTypes, G, N, g, n)};
    if (spec.scheme.has_zero_points())
      parts.push_back(block_part(m + ".qzeros", {StDType::i32}, G, N / 8, g, words));
    add_bias_part(parts, store, spec);
    return parts;
  }

  Projection decode(const TensorStore& parts, const ProjectionSpec& spec) const override {
    const int64_t N = spec.rows().count, K = spec.cols().count, G = spec.groups().count;
    Projection p;
    p.codes = unpack_along_cols_transposed(parts.at(spec.module + ".qweight").bytes, K, N / 8, 4,
                                           kAwqSlotOf);
    p.scales = read_floats(parts.at(spec.module + ".scales"), G, N).transposed();
    if (spec.scheme.has_zero_points()) {
      p.zeros = unpack_along_cols_transposed(parts.at(spec.module + ".qzeros").bytes, G, N / 8, 4,
                                             kAwqSlotOf);
    }
    p.bias = read_bias(parts, spec);
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

class AwqMethod final : public QuantMethod {
 public:
  QuantConfig parse(const ordered_json& q, std::string_view file) const override {
    QuantConfig c;
    c.scheme.bits = static_cast<int>(find_key(q, "w_bit") ? get_int(q, "w_bit", file)
                                                          : get_int(q, "bits", file));
    c.scheme.group_size =
        static_cast<int>(find_key(q, "q_group_size") ? get_int(q, "q_group_size", file)
                                                     : get_int(q, "group_size", file));
    if (c.scheme.group_size == -1) c.scheme.group_size = kChannelwise;
    c.scheme.zero_point =
        get_bool(q, "zero_point", file, true) ? ZeroPoint::explicit_ : ZeroPoint::none;
    const std::string version = lower(get_string(q, "version", file, "gemm"));
    check(version == "gemm", "{}: AWQ version '{}' is not supported (valid: gemm)", file, version);
    check(c.scheme.bits == 4, "{}: AWQ gemm checkpoints are 4-bit, got bits = {}", file,
          c.scheme.bits);
    return c;
  }

  std::optional<QuantScheme> scheme_for(const QuantConfig& config,
                                        const std::string& module) const override {
    if (not_converted(config.raw, module)) return std::nullopt;
    return config.scheme;
  }
};

}  // namespace

bool not_converted(const ordered_json& q, const std::string& module) {
  const ordered_json* skip = find_key(q, "modules_to_not_convert");
  if (!skip || !skip->is_array()) return false;
  for (const ordered_json& s : *skip) {
    if (s.is_string() && module.find(s.get<std::string>()) != std::string::npos) return true;
  }
  return false;
}

const FormatAdapter& awq_adapter() {
  static const AwqAdapter adapter;
  return adapter;
}

const QuantMethod& awq_method() {
  static const AwqMethod method;
  return method;
}

}  // namespace qmoe::format
