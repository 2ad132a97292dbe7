// AMD Quark OCP-MX checkpoints (quant_method "quark"; amd-quark 0.13 export_safetensors, read
// the same way by vLLM's quark/quark_moe.py), per projection of N outputs x K inputs, N-first:
//   weight        U8 [N, K/2]   e2m1 codes (bit 3 sign), two per byte along K: k = 2i in the low
//                               nibble of byte i, 2i + 1 in the high one (Quark's Pack_fp4, which
//                               ignores pack_method "reorder"): exactly the canonical packing
//   weight_scale  U8 [N, K/32]  e8m0: 2^(s - 127) per 32 values along K
//   bias          float [N]     optional
// quantization_config: global_quant_config, layer_quant_config {pattern: layer config} overriding
// it for the module names that pattern matches, layer_type_quant_config, and exclude (patterns of
// modules left in float; the export writes them expanded to full names). Patterns are Python
// fnmatch globs. A layer config holds tensor specs weight / input_tensors / output_tensors /
// bias, each with dtype, qscheme, group_size, scale_format, is_dynamic, scale_calculation_mode.
// qmoe reads MXFP4 weights (dtype fp4, per_group 32, e8m0), without activation quantization
// (W4A16, vLLM's w_mxfp4) or with dynamic MXFP4 activations (W4A4, w_mxfp4_a_mxfp4), whose
// scale_calculation_mode "even" (Quark's default) or "floor" picks the block scale rule.
#include <cstring>

#include "core/check.hpp"
#include "format/adapter.hpp"
#include "format/json_fields.hpp"
#include "format/module_pattern.hpp"
#include "format/quant_method.hpp"
#include "format/tensor_read.hpp"
#include "quant/mxfp4.hpp"

namespace qmoe::format {

namespace {

constexpr const char* kValidWeight =
    "valid: dtype fp4, qscheme per_group, group_size 32, scale_format e8m0 (OCP MXFP4)";
constexpr const char* kValidInput =
    "valid: null (W4A16), or dtype fp4, qscheme per_group, group_size 32, is_dynamic true, "
    "scale_calculation_mode even or floor (W4A4)";

// The MXFP4 fields a weight or input spec must hold; `valid` ends the message when one differs.
void expect_mx_fp4(const ordered_json& spec, const std::string& where, const char* valid) {
  check(spec.is_object(), "{}: must be an object or null, got {} ({})", where, spec.dump(), valid);
  const std::string dtype = get_string(spec, "dtype", where);
  check(dtype == "fp4", "{}: dtype '{}' is not supported ({})", where, dtype, valid);
  const std::string qscheme = get_string(spec, "qscheme", where, "per_group");
  check(qscheme == "per_group", "{}: qscheme '{}' is not supported ({})", where, qscheme, valid);
  const int64_t group = get_int(spec, "group_size", where, kMxBlock);
  check(group == kMxBlock, "{}: group_size {} is not supported ({})", where, group, valid);
  const std::string scale_format = get_string(spec, "scale_format", where, "e8m0");
  check(scale_format == "e8m0", "{}: scale_format '{}' is not supported ({})", where, scale_format,
        valid);
  const int64_t axis = get_int(spec, "ch_axis", where, -1);
  check(axis == -1 || axis == 1, "{}: ch_axis {} groups along N, not K ({})", where, axis, valid);
}

// The scheme a Quark layer config gives its module, or nullopt when it quantizes no weight.
std::optional<QuantScheme> quark_scheme(const ordered_json& layer, const std::string& where) {
  check(layer.is_object(), "{}: must be an object, got {}", where, layer.dump());
  for (const char* unsupported : {"output_tensors", "bias"}) {
    check(!find_key(layer, unsupported),
          "{}: quantizes {} too, which qmoe does not read (valid: weight and input_tensors only)",
          where, unsupported);
  }
  const ordered_json* weight = find_key(layer, "weight");
  if (!weight) {
    check(!find_key(layer, "input_tensors"),
          "{}: quantizes input_tensors but not the weight; qmoe reads weight-quantized layers",
          where);
    return std::nullopt;
  }
  check(!weight->is_array(),
        "{}.weight: a list of specs (double quantization) is not supported ({})", where,
        kValidWeight);
  expect_mx_fp4(*weight, where + ".weight", kValidWeight);
  check(!get_bool(*weight, "is_dynamic", where + ".weight", false),
        "{}.weight: is_dynamic true is not a stored checkpoint scheme ({})", where, kValidWeight);
  QuantScheme s{.kind = WeightKind::mxfp4,
                .bits = 4,
                .group_size = kMxBlock,
                .source_scale_dtype = DType::u8};
  const ordered_json* input = find_key(layer, "input_tensors");
  if (!input) return s;
  const std::string in = where + ".input_tensors";
  check(!input->is_array(), "{}: a list of specs is not supported ({})", in, kValidInput);
  expect_mx_fp4(*input, in, kValidInput);
  check(get_bool(*input, "is_dynamic", in, false),
        "{}: static activation scales are not supported ({})", in, kValidInput);
  // Absent, Quark's OCP_MXFP4Spec takes "even". ("ceil" has no e8m0 scale rule in qmoe.)
  const std::string rule = get_string(*input, "scale_calculation_mode", in, "even");
  check(rule == "even" || rule == "floor", "{}: scale_calculation_mode '{}' is not supported ({})",
        in, rule, kValidInput);
  s.activation_quant = rule == "even" ? ActivationQuant::mxfp4_even : ActivationQuant::mxfp4;
  return s;
}

bool matches_any(const ordered_json* patterns, const std::string& module) {
  if (!patterns || !patterns->is_array()) return false;
  for (const ordered_json& p : *patterns)
    if (p.is_string() && glob_match(p.get<std::string>(), module)) return true;
  return false;
}

// The layer config of `module`: its exact name in layer_quant_config, else the first pattern there
// that matches it, else global_quant_config. `where` names it in messages.
const ordered_json& layer_config(const ordered_json& q, const std::string& module,
                                 std::string& where) {
  if (const ordered_json* per_layer = find_key(q, "layer_quant_config")) {
    if (per_layer->contains(module)) {
      where = "quantization_config.layer_quant_config." + module;
      return (*per_layer)[module];
    }
    for (const auto& [pattern, config] : per_layer->items()) {
      if (glob_match(pattern, module)) {
        where = "quantization_config.layer_quant_config." + pattern;
        return config;
      }
    }
  }
  where = "quantization_config.global_quant_config";
  return q["global_quant_config"];
}

class QuarkMethod final : public QuantMethod {
 public:
  QuantConfig parse(const ordered_json& q, std::string_view file) const override {
    const std::string at = fmt::format("{}: quantization_config", file);
    const ordered_json* global = find_key(q, "global_quant_config");
    check(global && global->is_object(), "{}: missing global_quant_config", at);
    if (const ordered_json* by_type = find_key(q, "layer_type_quant_config")) {
      check(by_type->is_object() && by_type->empty(),
            "{}.layer_type_quant_config: per-layer-type overrides are not supported (valid: {{}}; "
            "use layer_quant_config with module name patterns)",
            at);
    }
    const ordered_json* exclude = find_key(q, "exclude");
    check(!exclude || exclude->is_array(), "{}.exclude: must be a list of module name patterns",
          at);
    std::optional<QuantScheme> first = quark_scheme(*global, at + ".global_quant_config");
    if (const ordered_json* per_layer = find_key(q, "layer_quant_config")) {
      check(per_layer->is_object(), "{}.layer_quant_config: must be an object", at);
      for (const auto& [pattern, config] : per_layer->items()) {
        const std::optional<QuantScheme> s =
            quark_scheme(config, at + ".layer_quant_config." + pattern);
        if (!first) first = s;
      }
    }
    check(first.has_value(), "{}: quantizes no weights (global_quant_config has no weight spec)",
          at);
    QuantConfig c;
    c.scheme = *first;
    return c;
  }

  std::optional<QuantScheme> scheme_for(const QuantConfig& config,
                                        const std::string& module) const override {
    if (matches_any(find_key(config.raw, "exclude"), module)) return std::nullopt;
    std::string where;
    const ordered_json& layer = layer_config(config.raw, module, where);
    return quark_scheme(layer, where);
  }
};

class QuarkAdapter final : public FormatAdapter {
 public:
  std::string_view packed_suffix() const override { return "weight"; }
  std::string_view scales_suffix() const override { return "weight_scale"; }

  std::vector<TensorPart> parts(const TensorStore& store,
                                const ProjectionSpec& spec) const override {
    const int64_t N = spec.N, K = spec.K;
    check(K % kMxBlock == 0,
          "{}: MXFP4 groups {} values along K, so K = {} must be a multiple of {}", spec.module,
          kMxBlock, K, kMxBlock);
    spec.check_cut(1, kMxBlock, "MXFP4 scales one block of 32 values along K");
    // weight [N, K/2] and weight_scale [N, K/32]: an N cut takes whole rows, a K cut the blocks'
    // bytes of every row.
    const Range n = spec.rows(), k = spec.cols();
    std::vector<TensorPart> parts{
        block_part(spec.module + ".weight", {StDType::u8}, N, K / 2, n, {k.first / 2, k.count / 2}),
        block_part(spec.module + ".weight_scale", {StDType::u8}, N, K / kMxBlock, n,
                   {k.first / kMxBlock, k.count / kMxBlock})};
    add_bias_part(parts, store, spec);
    return parts;
  }

  Projection decode(const TensorStore& parts, const ProjectionSpec& spec) const override {
    const int64_t N = spec.rows().count, K = spec.cols().count;
    const TensorInfo& weight = parts.at(spec.module + ".weight");
    const TensorInfo& scales = parts.at(spec.module + ".weight_scale");
    Projection p;
    p.codes.rows = N;
    p.codes.cols = K;
    if (spec.codes_out) {
      std::memcpy(spec.codes_out, weight.bytes.data(), weight.bytes.size());
      p.codes_in_place = true;
    } else {
      p.codes.values.resize(static_cast<size_t>(N * K));
      for (int64_t i = 0; i < N * K; ++i) {
        const auto byte = static_cast<uint8_t>(weight.bytes[static_cast<size_t>(i / 2)]);
        p.codes.values[static_cast<size_t>(i)] = (byte >> (4 * (i % 2))) & 0xf;
      }
    }
    p.e8m0 = Matrix<uint8_t>(N, K / kMxBlock);
    std::memcpy(p.e8m0.values.data(), scales.bytes.data(), scales.bytes.size());
    p.bias = read_bias(parts, spec);
    return p;
  }

  void write(SafetensorsWriter& out, const ProjectionSpec& spec, const Projection& p,
             const WriteOptions& options) const override {
    check(spec.scheme.kind == WeightKind::mxfp4,
          "{}: the quark format holds MXFP4 (OCP MX) weights, not {} (valid: mxfp4, with or "
          "without MXFP4 activations)",
          spec.module, to_string(spec.scheme));
    const int64_t N = spec.N, K = spec.K;
    std::vector<uint8_t> packed(static_cast<size_t>(N * K / 2));
    for (size_t i = 0; i < packed.size(); ++i)
      packed[i] = static_cast<uint8_t>(p.codes.values[2 * i] | (p.codes.values[2 * i + 1] << 4));
    out.add<uint8_t>(spec.module + ".weight", StDType::u8, {N, K / 2}, packed);
    out.add<uint8_t>(spec.module + ".weight_scale", StDType::u8, {N, K / kMxBlock}, p.e8m0.values);
    add_bias(out, spec, p, options);
  }

  ordered_json quantization_config(const QuantScheme& s, const WriteOptions&) const override {
    const auto mx_spec = [](bool dynamic, const char* rule) {
      return ordered_json{{"dtype", "fp4"},
                          {"qscheme", "per_group"},
                          {"group_size", kMxBlock},
                          {"ch_axis", -1},
                          {"scale_format", "e8m0"},
                          {"is_dynamic", dynamic},
                          {"round_method", "half_even"},
                          {"scale_calculation_mode", rule}};
    };
    const ordered_json input =
        s.activation_quant == ActivationQuant::none
            ? ordered_json(nullptr)
            : mx_spec(true, s.activation_quant == ActivationQuant::mxfp4_even ? "even" : "floor");
    const ordered_json global = {{"weight", mx_spec(false, "floor")},
                                 {"input_tensors", input},
                                 {"output_tensors", nullptr},
                                 {"bias", nullptr}};
    return {{"quant_method", "quark"},
            {"global_quant_config", global},
            {"layer_quant_config", ordered_json::object()},
            {"layer_type_quant_config", ordered_json::object()},
            {"exclude", {"lm_head", "*.mlp.gate", "*.block_sparse_moe.gate"}},
            {"export", {{"weight_format", "real_quantized"}, {"pack_method", "reorder"}}}};
  }
};

}  // namespace

const QuantMethod& quark_method() {
  static const QuarkMethod method;
  return method;
}

const FormatAdapter& quark_adapter() {
  static const QuarkAdapter adapter;
  return adapter;
}

}  // namespace qmoe::format
