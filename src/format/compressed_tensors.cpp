// compressed-tensors "pack-quantized", per projection of N outputs x K inputs, stored N-first
// (compressed-tensors compressors/pack_quantized/{base.py, helpers.py} `pack_to_int32` /
// `unpack_from_int32`, quantization/quant_args.py):
//   weight_packed     I32 [N, ceil(K/pf)]  packed along K: code (n, k) is field k % pf of
//                                          weight_packed[n][k / pf]
//   weight_scale      F16/BF16/F32 [N, G]  (channel strategy: G = 1)
//   weight_zero_point I32 [ceil(N/pf), G]  asymmetric only; packed along N (packed_dim 0):
//                                          zero (n, g) is field n % pf of [n / pf][g]
//   weight_g_idx      I32 [K]              actorder "group" only
//   weight_shape      I64 (older: I32) [2] = [N, K]
// Values are signed in the quantizer and stored offset by 2^(bits-1) (weights and zero points
// alike), so the stored unsigned fields are exactly the canonical codes and zeros: for symmetric
// schemes a stored 2^(bits-1) means 0, the canonical implicit zero.
// quantization_config: format, quantization_status, config_groups (each with targets and a
// weights scheme: num_bits, type, symmetric, strategy, group_size, actorder, dynamic), ignore.
// Targets and ignore entries are module names, "Linear" (any module) or "re:" + a Python regex.
#include "core/check.hpp"
#include "format/adapter.hpp"
#include "format/json_fields.hpp"
#include "format/module_pattern.hpp"
#include "format/quant_method.hpp"
#include "format/tensor_read.hpp"

namespace qmoe::format {

namespace {

class CompressedTensorsAdapter final : public FormatAdapter {
 public:
  std::string_view packed_suffix() const override { return "weight_packed"; }
  std::string_view scales_suffix() const override { return "weight_scale"; }

  std::vector<TensorPart> parts(const TensorStore& store,
                                const ProjectionSpec& spec) const override {
    const QuantScheme& s = spec.scheme;
    const int pf = pack_factor(s.bits);
    const int64_t N = spec.N, K = spec.K, G = s.groups_for(K);
    check_group_divides(spec);
    spec.check_cut(s.has_zero_points() ? pf : 1, pf,
                   "compressed-tensors packs codes along K and zero points along N in int32 words");
    // weight_packed [N, ceil(K/pf)]: an N cut takes whole rows, a K cut words of every row.
    // weight_scale [N, G]: rows and groups. weight_zero_point [ceil(N/pf), G]: rows of words.
    const Range n = spec.rows(), k = spec.cols(), g = spec.groups();
    const std::string& m = spec.module;
    std::vector<TensorPart> parts{
        whole_part(m + ".weight_shape", {StDType::i64, StDType::i32}, {2}),
        block_part(m + ".weight_packed", {StDType::i32}, N, ceil_div(K, pf), n,
                   {k.first / pf, ceil_div(k.count, pf)}),
        block_part(m + ".weight_scale", kFloatDTypes, N, G, n, g)};
    if (s.has_zero_points()) {
      parts.push_back(block_part(m + ".weight_zero_point", {StDType::i32}, ceil_div(N, pf), G,
                                 {n.first / pf, ceil_div(n.count, pf)}, g));
    }
    if (s.act_order)
      parts.push_back(span_part(m + ".weight_g_idx", {StDType::i32, StDType::i64}, K, k));
    add_bias_part(parts, store, spec);
    return parts;
  }

  Projection decode(const TensorStore& parts, const ProjectionSpec& spec) const override {
    const QuantScheme& s = spec.scheme;
    const int pf = pack_factor(s.bits);
    const int64_t N = spec.rows().count, K = spec.cols().count, G = spec.groups().count;
    const std::vector<int64_t> shape = read_ints(parts.at(spec.module + ".weight_shape"), 2);
    check(shape[0] == spec.N && shape[1] == spec.K,
          "{}.weight_shape is [{}, {}], expected [{}, {}]", spec.module, shape[0], shape[1], spec.N,
          spec.K);
    Projection p;
    const Matrix<uint8_t> codes = unpack_along_cols(parts.at(spec.module + ".weight_packed").bytes,
                                                    N, ceil_div(K, pf), s.bits);
    p.codes = Matrix<uint8_t>(N, K);
    for (int64_t n = 0; n < N; ++n)
      for (int64_t k = 0; k < K; ++k) p.codes.at(n, k) = codes.at(n, k);
    p.scales = read_floats(parts.at(spec.module + ".weight_scale"), N, G);
    if (s.has_zero_points()) {
      Matrix<uint8_t> zeros = unpack_along_rows(parts.at(spec.module + ".weight_zero_point").bytes,
                                                ceil_div(N, pf), G, s.bits);
      zeros.rows = N;
      zeros.values.resize(static_cast<size_t>(N * G));
      p.zeros = std::move(zeros);
    }
    if (s.act_order) {
      const int64_t all_groups = s.groups_for(spec.K);
      for (int64_t g : read_ints(parts.at(spec.module + ".weight_g_idx"), K)) {
        check(g >= 0 && g < all_groups, "{}.weight_g_idx: group {} outside 0..{}", spec.module, g,
              all_groups - 1);
        p.g_idx.push_back(static_cast<int32_t>(g));
      }
    }
    p.bias = read_bias(parts, spec);
    return p;
  }

  void write(SafetensorsWriter& out, const ProjectionSpec& spec, const Projection& p,
             const WriteOptions& options) const override {
    const QuantScheme& s = spec.scheme;
    const int64_t N = spec.N, K = spec.K, G = s.groups_for(K);
    const int pf = pack_factor(s.bits);
    check_group_divides(spec);
    out.add<uint32_t>(spec.module + ".weight_packed", StDType::i32, {N, ceil_div(K, pf)},
                      pack_along_cols(p.codes, s.bits));
    add_floats(out, spec.module + ".weight_scale", {N, G}, p.scales.values, options);
    if (s.has_zero_points()) {
      out.add<uint32_t>(spec.module + ".weight_zero_point", StDType::i32, {ceil_div(N, pf), G},
                        pack_along_rows(p.zeros, s.bits));
    }
    if (s.act_order) {
      out.add<int32_t>(spec.module + ".weight_g_idx", StDType::i32, {K}, p.g_idx);
    }
    const std::vector<int64_t> shape{N, K};
    out.add<int64_t>(spec.module + ".weight_shape", StDType::i64, {2}, shape);
    add_bias(out, spec, p, options);
  }

  ordered_json quantization_config(const QuantScheme& s, const WriteOptions&) const override {
    ordered_json weights = {{"num_bits", s.bits},
                            {"type", "int"},
                            {"symmetric", !s.has_zero_points()},
                            {"dynamic", false}};
    if (s.group_size == kChannelwise) {
      weights["strategy"] = "channel";
      weights["group_size"] = nullptr;
    } else {
      weights["strategy"] = "group";
      weights["group_size"] = s.group_size;
    }
    weights["actorder"] = s.act_order ? ordered_json("group") : ordered_json(nullptr);
    ordered_json group = {{"targets", {"Linear"}},
                          {"weights", weights},
                          {"input_activations", nullptr},
                          {"output_activations", nullptr},
                          {"format", "pack-quantized"}};
    return {{"quant_method", "compressed-tensors"},
            {"format", "pack-quantized"},
            {"quantization_status", "compressed"},
            {"config_groups", {{"group_0", group}}},
            {"ignore", {"lm_head", "re:.*mlp.gate$", "re:.*block_sparse_moe.gate$"}}};
  }
};

QuantScheme ct_scheme(const ordered_json& group, const std::string& top_format,
                      std::string_view file, const std::string& group_name) {
  const std::string where = fmt::format("{}: config_groups.{}", file, group_name);
  const std::string format = get_string(group, "format", where, top_format);
  check(format == "pack-quantized", "{}: format '{}' is not supported (valid: pack-quantized)",
        where, format);
  check(!find_key(group, "input_activations"),
        "{}: quantizes activations too; qmoe reads weight-only (WNA16) schemes", where);
  const ordered_json* w = find_key(group, "weights");
  check(w && w->is_object(), "{}: missing 'weights'", where);
  const std::string type = get_string(*w, "type", where, "int");
  check(type == "int", "{}: weights type '{}' is not supported (valid: int)", where, type);
  check(!get_bool(*w, "dynamic", where, false),
        "{}: dynamic weight quantization is not a stored "
        "checkpoint scheme",
        where);
  QuantScheme s;
  s.bits = static_cast<int>(get_int(*w, "num_bits", where));
  s.zero_point = get_bool(*w, "symmetric", where, true) ? ZeroPoint::none : ZeroPoint::explicit_;
  const int64_t group_size = get_int(*w, "group_size", where, -1);
  std::string strategy = get_string(*w, "strategy", where, group_size > 0 ? "group" : "channel");
  if (strategy == "group") {
    check(group_size > 0, "{}: strategy group needs a positive group_size, got {}", where,
          group_size);
    s.group_size = static_cast<int>(group_size);
  } else {
    check(strategy == "channel" && group_size <= 0,
          "{}: strategy '{}' with group_size {} is not supported (valid: group with a positive "
          "group_size, channel)",
          where, strategy, group_size);
    s.group_size = kChannelwise;
  }
  // actorder "group" (alias "dynamic", or true) stores g_idx; "weight" (alias "static") reorders
  // at quantization time and stores none.
  s.act_order = false;
  if (const ordered_json* a = find_key(*w, "actorder")) {
    if (a->is_boolean()) {
      s.act_order = a->get<bool>();
    } else {
      check(a->is_string(), "{}: actorder must be a string, got {}", where, a->dump());
      const std::string order = a->get<std::string>();
      check(order == "group" || order == "dynamic" || order == "weight" || order == "static",
            "{}: actorder '{}' is not supported (valid: group, dynamic, weight, static)", where,
            order);
      s.act_order = order == "group" || order == "dynamic";
    }
  }
  check(!(s.act_order && s.group_size == kChannelwise), "{}: actorder group needs strategy group",
        where);
  return s;
}

bool ct_matches(const ordered_json& patterns, const std::string& module) {
  if (!patterns.is_array()) return false;
  for (const ordered_json& p : patterns) {
    if (!p.is_string()) continue;
    const std::string text = p.get<std::string>();
    if (text == "Linear" || text == module) return true;
    if (text.rfind("re:", 0) == 0 && python_re_match(text.substr(3), module)) return true;
  }
  return false;
}

class CompressedTensorsMethod final : public QuantMethod {
 public:
  QuantConfig parse(const ordered_json& q, std::string_view file) const override {
    QuantConfig c;
    const std::string status = get_string(q, "quantization_status", file, "compressed");
    check(status == "compressed",
          "{}: quantization_status '{}': the weights are not stored packed (valid: compressed)",
          file, status);
    const ordered_json* groups = find_key(q, "config_groups");
    check(groups && groups->is_object() && !groups->empty(), "{}: missing config_groups", file);
    const std::string top_format = get_string(q, "format", file, "pack-quantized");
    for (const auto& [group_name, group] : groups->items()) {
      const QuantScheme s = ct_scheme(group, top_format, file, group_name);
      if (group_name == groups->begin().key()) c.scheme = s;
    }
    return c;
  }

  std::optional<QuantScheme> scheme_for(const QuantConfig& config,
                                        const std::string& module) const override {
    const ordered_json& raw = config.raw;
    if (const ordered_json* ignore = find_key(raw, "ignore");
        ignore && ct_matches(*ignore, module)) {
      return std::nullopt;
    }
    for (const auto& [group_name, group] : raw["config_groups"].items()) {
      if (const ordered_json* targets = find_key(group, "targets");
          targets && ct_matches(*targets, module)) {
        return ct_scheme(group, get_string(raw, "format", "config", "pack-quantized"), "config",
                         group_name);
      }
    }
    return std::nullopt;
  }
};

}  // namespace

const FormatAdapter& compressed_tensors_adapter() {
  static const CompressedTensorsAdapter adapter;
  return adapter;
}

const QuantMethod& compressed_tensors_method() {
  static const CompressedTensorsMethod method;
  return method;
}

}  // namespace qmoe::format
