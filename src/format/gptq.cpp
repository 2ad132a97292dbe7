// GPTQ (AutoGPTQ / GPTQModel / AutoRound "gptq" format), per projection of N outputs x K inputs,
// pf = 32 / bits fields per int32, LSB first (AutoGPTQ auto_gptq/nn_modules/qlinear/
// qlinear_cuda_old.py `pack`, GPTQModel gptqmodel/nn_modules/qlinear/__init__.py `pack_block`):
//   qweight I32 [K/pf, N]  packed along K: code (n, k) is field k % pf of qweight[k / pf][n]
//   qzeros  I32 [G, N/pf]  packed along N: zero (n, g) is field n % pf of qzeros[g][n / pf];
//                          v1 ("gptq") stores z - 1 (read back as (field + 1) & mask, AutoGPTQ
//                          `forward`), v2 ("gptq_v2", GPTQModel quantization/config.py) stores z;
//                          AutoGPTQ's v1 packer does not mask z - 1, so a zero point of 0 also
//                          overwrites the fields above it (gptq_zero_overflow.hpp: the rule reads
//                          that field exactly as 0, and the lost ones above it as 0 too)
//   scales  F16/BF16/F32 [G, N], g_idx I32 [K], bias [N] (optional)
// Symmetric checkpoints still carry qzeros, all equal to 2^(bits-1) (auto_gptq quantizer.py
// `zero = (maxq + 1) / 2`); the reader checks that instead of trusting the config.
// quantization_config (also quantize_config.json): bits, group_size, desc_act, sym,
// format | checkpoint_format, and dynamic: per-module overrides keyed by a Python regex ("+:" or
// no prefix: these parameters, "-:": left unquantized), the first match winning.
#include <fmt/format.h>

#include "core/check.hpp"
#include "format/adapter.hpp"
#include "format/gptq_zero_overflow.hpp"
#include "format/json_fields.hpp"
#include "format/module_pattern.hpp"
#include "format/quant_method.hpp"
#include "format/tensor_read.hpp"

namespace qmoe::format {

namespace {

class GptqAdapter final : public FormatAdapter {
 public:
  std::string_view packed_suffix() const override { return "qweight"; }
  std::string_view scales_suffix() const override { return "scales"; }

  std::vector<TensorPart> parts(const TensorStore& store,
                                const ProjectionSpec& spec) const override {
    const QuantScheme& s = spec.scheme;
    const int pf = pack_factor(s.bits);
    const int64_t N = spec.N, K = spec.K, G = s.groups_for(K);
    check_group_divides(spec);
    check(K % pf == 0 && N % pf == 0,
          "{}: GPTQ packs {} {}-bit values per int32 along K and N, so K = {} and N = {} must be "
          "multiples of {}",
          spec.module, pf, s.bits, K, N, pf);
    spec.check_cut(pf, pf, "GPTQ packs codes along K and zero points along N in int32 words");
    // qweight [K/pf, N]: a K cut takes whole rows, an N cut columns of every row. scales [G, N]
    // and qzeros [G, N/pf]: the groups' rows, the output channels' columns (words of them).
    const Range n = spec.rows(), k = spec.cols(), g = spec.groups();
    const std::string& m = spec.module;
    std::vector<TensorPart> parts{
        block_part(m + ".qweight", {StDType::i32}, K / pf, N, {k.first / pf, k.count / pf}, n),
        block_part(m + ".scales", kFloatDTypes, G, N, g, n),
        block_part(m + ".qzeros", {StDType::i32}, G, N / pf, g, {n.first / pf, n.count / pf})};
    if (store.find(m + ".g_idx"))
      parts.push_back(span_part(m + ".g_idx", {StDType::i32, StDType::i64}, K, k));
    add_bias_part(parts, store, spec);
    return parts;
  }

  Projection decode(const TensorStore& parts, const ProjectionSpec& spec) const override {
    const QuantScheme& s = spec.scheme;
    const int pf = pack_factor(s.bits);
    const Range n = spec.rows(), k = spec.cols(), g = spec.groups();
    const int64_t N = n.count, K = k.count, G = g.count;
    Projection p;
    const TensorInfo& qweight = parts.at(spec.module + ".qweight");
    if (spec.codes_out) {
      p.codes.rows = N;
      p.codes.cols = K;
      transpose_words(qweight.bytes, K / pf, N, spec.codes_out);
      p.codes_in_place = true;
    } else {
      p.codes = unpack_along_rows_transposed(qweight.bytes, K / pf, N, s.bits);
    }

    p.scales = read_floats(parts.at(spec.module + ".scales"), G, N).transposed();

    const TensorInfo& qzeros = parts.at(spec.module + ".qzeros");
    if (spec.gptq_version == 1 && spec.strict_zeros) {
      const bool cut = n.count < spec.N || g.count < s.groups_for(spec.K);
      refuse_zero_overflows(qzeros.bytes, G, N / pf, s.bits,
                            cut ? fmt::format("{} (the part from group {}, word {})", qzeros.name,
                                              g.first, n.first / pf)
                                : qzeros.name);
    }
    Matrix<uint8_t> zeros = unpack_along_cols_transposed(qzeros.bytes, G, N / pf, s.bits);
    const int mask = s.max_code();
    for (uint8_t& z : zeros.values) {
      if (spec.gptq_version == 1) z = static_cast<uint8_t>((z + 1) & mask);
    }
    if (s.has_zero_points()) {
      p.zeros = std::move(zeros);
    } else {
      for (int64_t i = 0; i < static_cast<int64_t>(zeros.values.size()); ++i) {
        check(zeros.values[i] == s.implicit_zero(),
              "{}.qzeros: the config says sym, so every zero point must be {} (stored as {} in "
              "gptq v{}), but row {} group {} holds {}; is the checkpoint format (gptq vs gptq_v2) "
              "right?",
              spec.module, s.implicit_zero(),
              spec.gptq_version == 1 ? s.implicit_zero() - 1 : s.implicit_zero(), spec.gptq_version,
              n.first + i / G, g.first + i % G, zeros.values[i]);
      }
    }

    const TensorInfo* g_idx = parts.find(spec.module + ".g_idx");
    const int64_t all_groups = s.groups_for(spec.K);
    if (s.act_order) {
      check(g_idx != nullptr, "{}: desc_act is set but the module has no g_idx", spec.module);
      for (int64_t group : read_ints(*g_idx, K)) {
        check(group >= 0 && group < all_groups, "{}.g_idx: group {} outside 0..{}", spec.module,
              group, all_groups - 1);
        p.g_idx.push_back(static_cast<int32_t>(group));
      }
    } else if (g_idx) {
      const std::vector<int64_t> groups = read_ints(*g_idx, K);
      const int64_t gs = s.group_size_for(spec.K);
      for (int64_t i = 0; i < K; ++i) {
        const int64_t channel = k.first + i;
        check(groups[static_cast<size_t>(i)] == channel / gs,
              "{}.g_idx: desc_act is false, so channel {} must be in group {}, but g_idx says {}",
              spec.module, channel, channel / gs, groups[static_cast<size_t>(i)]);
      }
    }
    p.bias = read_bias(parts, spec);
    return p;
  }

  void write(SafetensorsWriter& out, const ProjectionSpec& spec, const Projection& p,
             const WriteOptions& options) const override {
    const QuantScheme& s = spec.scheme;
    const int pf = pack_factor(s.bits);
    const int64_t N = spec.N, K = spec.K, G = s.groups_for(K);
    check_group_divides(spec);
    check(K % pf == 0 && N % pf == 0, "{}: GPTQ needs K = {} and N = {} to be multiples of {}",
          spec.module, K, N, pf);
    out.add<uint32_t>(spec.module + ".qweight", StDType::i32, {K / pf, N},
                      pack_along_rows(p.codes.transposed(), s.bits));

    Matrix<uint8_t> stored = s.has_zero_points() ? p.zeros.transposed() : Matrix<uint8_t>(G, N);
    const int mask = s.max_code();
    for (uint8_t& z : stored.values) {
      if (!s.has_zero_points()) z = static_cast<uint8_t>(s.implicit_zero());
      // v1 keeps z - 1 within the field (a zero point of 0 becomes all ones), rather than
      // AutoGPTQ's unmasked OR, which spills into the neighbouring fields.
      if (options.gptq_version == 1) z = static_cast<uint8_t>((z - 1) & mask);
    }
    out.add<uint32_t>(spec.module + ".qzeros", StDType::i32, {G, N / pf},
                      pack_along_cols(stored, s.bits));

    add_floats(out, spec.module + ".scales", {G, N}, p.scales.transposed().values, options);

    std::vector<int32_t> g_idx = p.g_idx;
    if (!s.act_order) {
      const int64_t gs = s.group_size_for(K);
      for (int64_t k = 0; k < K; ++k) g_idx.push_back(static_cast<int32_t>(k / gs));
    }
    out.add<int32_t>(spec.module + ".g_idx", StDType::i32, {K}, g_idx);
    add_bias(out, spec, p, options);
  }

  ordered_json quantization_config(const QuantScheme& s,
                                   const WriteOptions& options) const override {
    const char* format = options.gptq_version == 1 ? "gptq" : "gptq_v2";
    return {{"quant_method", "gptq"},
            {"bits", s.bits},
            {"group_size", s.group_size == kChannelwise ? -1 : s.group_size},
            {"desc_act", s.act_order},
            {"sym", !s.has_zero_points()},
            {"format", format},
            {"checkpoint_format", format}};
  }
};

QuantScheme gptq_scheme(const ordered_json& q, std::string_view file, const QuantScheme& base) {
  QuantScheme s = base;
  s.bits = static_cast<int>(get_int(q, "bits", file, base.bits));
  s.group_size = static_cast<int>(get_int(q, "group_size", file, base.group_size));
  if (s.group_size == -1) s.group_size = kChannelwise;
  s.zero_point =
      get_bool(q, "sym", file, !base.has_zero_points()) ? ZeroPoint::none : ZeroPoint::explicit_;
  // vLLM (auto_gptq.py) normalizes desc_act with channelwise scales to no act-order: one group
  // makes the permutation irrelevant.
  s.act_order = get_bool(q, "desc_act", file, base.act_order) && s.group_size != kChannelwise;
  return s;
}

class GptqMethod final : public QuantMethod {
 public:
  QuantConfig parse(const ordered_json& q, std::string_view file) const override {
    QuantConfig c;
    QuantScheme defaults;
    defaults.group_size = kChannelwise;
    c.scheme = gptq_scheme(q, file, defaults);
    const std::string format =
        get_string(q, "format", file, get_string(q, "checkpoint_format", file, "gptq"));
    check(format == "gptq" || format == "gptq_v2",
          "{}: GPTQ format '{}' is not supported (valid: gptq, gptq_v2; marlin and gptq_p are "
          "kernel-specific repacks)",
          file, format);
    c.gptq_version = format == "gptq_v2" ? 2 : 1;
    if (const ordered_json* d = find_key(q, "dynamic")) {
      check(d->is_object(), "{}: GPTQ 'dynamic' must be an object of module patterns", file);
    }
    return c;
  }

  std::optional<QuantScheme> scheme_for(const QuantConfig& config,
                                        const std::string& module) const override {
    const ordered_json* dynamic = find_key(config.raw, "dynamic");
    if (!dynamic) return config.scheme;
    for (const auto& [key, overrides] : dynamic->items()) {
      const bool negative = key.rfind("-:", 0) == 0;
      const std::string pattern = key.rfind("+:", 0) == 0 || negative ? key.substr(2) : key;
      if (!python_re_match(pattern, module)) continue;
      if (negative) return std::nullopt;
      check(overrides.is_object(), "GPTQ dynamic['{}'] must be an object of overrides", key);
      return gptq_scheme(overrides, fmt::format("GPTQ dynamic['{}']", key), config.scheme);
    }
    return config.scheme;
  }
};

}  // namespace

const FormatAdapter& gptq_adapter() {
  static const GptqAdapter adapter;
  return adapter;
}

const QuantMethod& gptq_method() {
  static const GptqMethod method;
  return method;
}

}  // namespace qmoe::format
