// config.json keys, as written by transformers and the quantizers:
//  - MoE shape: num_local_experts (Mixtral) | num_experts (Qwen-MoE) | n_routed_experts (DeepSeek),
//    num_experts_per_tok, hidden_size, moe_intermediate_size (else intermediate_size), hidden_act,
//    scoring_func, n_group / topk_group / topk_method, norm_topk_prob, routed_scaling_factor.
//  - quantization_config (spec/vllm-wna16-moe.md §3): GPTQ bits, group_size, desc_act, sym,
//    format | checkpoint_format, dynamic; AWQ bits | w_bit, group_size | q_group_size, zero_point,
//    version, modules_to_not_convert; compressed-tensors format, config_groups, ignore,
//    quantization_status.
#include "format/model_config.hpp"

#include <algorithm>
#include <cctype>
#include <regex>

#include "core/check.hpp"
#include "format/regular_file.hpp"

namespace qmoe::format {

namespace {

const ordered_json* find_key(const ordered_json& j, std::string_view key) {
  auto it = j.find(key);
  return it == j.end() || it->is_null() ? nullptr : &*it;
}

int64_t get_int(const ordered_json& j, std::string_view key, std::string_view file,
                std::optional<int64_t> fallback = std::nullopt) {
  const ordered_json* v = find_key(j, key);
  if (!v) {
    check(fallback.has_value(), "{}: missing integer '{}'", file, key);
    return *fallback;
  }
  check(v->is_number_integer(), "{}: '{}' must be an integer, got {}", file, key, v->dump());
  return v->get<int64_t>();
}

bool get_bool(const ordered_json& j, std::string_view key, std::string_view file, bool fallback) {
  const ordered_json* v = find_key(j, key);
  if (!v) return fallback;
  check(v->is_boolean(), "{}: '{}' must be true or false, got {}", file, key, v->dump());
  return v->get<bool>();
}

std::string get_string(const ordered_json& j, std::string_view key, std::string_view file,
                       std::optional<std::string> fallback = std::nullopt) {
  const ordered_json* v = find_key(j, key);
  if (!v) {
    check(fallback.has_value(), "{}: missing string '{}'", file, key);
    return *fallback;
  }
  check(v->is_string(), "{}: '{}' must be a string, got {}", file, key, v->dump());
  return v->get<std::string>();
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

int64_t first_int(const ordered_json& j, std::initializer_list<std::string_view> keys,
                  std::string_view file, std::string_view what) {
  for (std::string_view key : keys) {
    if (find_key(j, key)) return get_int(j, key, file);
  }
  std::string names;
  for (std::string_view key : keys) names += fmt::format("{}{}", names.empty() ? "" : " / ", key);
  fail("{}: no {} ({})", file, what, names);
}

MoEConfig parse_moe(const ordered_json& c, std::string_view file, const std::string& model_type) {
  MoEConfig moe;
  moe.num_experts = first_int(c, {"num_local_experts", "num_experts", "n_routed_experts"}, file,
                              "expert count; is this an MoE model?");
  moe.routing.top_k = static_cast<int>(get_int(c, "num_experts_per_tok", file));
  moe.hidden = get_int(c, "hidden_size", file);
  moe.intermediate = first_int(c, {"moe_intermediate_size", "intermediate_size"}, file,
                               "expert intermediate size");
  moe.activation = parse_activation(get_string(c, "hidden_act", file, "silu"));
  if (model_type == "gpt_oss") {
    // gpt-oss's config says "silu" but its experts use the clamped SwiGLU (modeling_gpt_oss.py:
    // alpha 1.702, clamp at swiglu_limit, up + 1); the canonical w13 de-interleaves gate and up.
    moe.activation = Activation::swigluoai_uninterleave;
    moe.activation_params = ActivationParams{.alpha = 1.702f, .limit = 7.0f, .beta = 1.0f};
    if (const ordered_json* limit = find_key(c, "swiglu_limit")) {
      check(limit->is_number(), "{}: swiglu_limit must be a number, got {}", file, limit->dump());
      moe.activation_params.limit = limit->get<float>();
    }
  }
  const std::string scoring = get_string(c, "scoring_func", file, "softmax");
  check(scoring == "softmax" || scoring == "sigmoid",
        "{}: scoring_func '{}' is not supported (valid: softmax, sigmoid)", file, scoring);
  moe.routing.scoring = scoring == "softmax" ? Scoring::softmax : Scoring::sigmoid;
  // Mixtral always renormalizes its top-k softmax weights, and gpt-oss takes the softmax of the
  // top-k logits (the same thing); neither has a key for it.
  moe.routing.renormalize =
      get_bool(c, "norm_topk_prob", file, model_type == "mixtral" || model_type == "gpt_oss");
  if (const ordered_json* f = find_key(c, "routed_scaling_factor")) {
    check(f->is_number(), "{}: routed_scaling_factor must be a number, got {}", file, f->dump());
    moe.routing.routed_scaling_factor = f->get<float>();
  }
  // Llama 4 (modeling_llama4.py Llama4TextMoe): sigmoid of the top-k logits, not renormalized,
  // and the router weight scales the expert's input, not its output.
  if (model_type == "llama4_text" || model_type == "llama4") {
    moe.routing.scoring = Scoring::sigmoid;
    moe.routing.renormalize = false;
    moe.apply_router_weight_on_input = true;
  }
  // DeepSeek's "greedy" top-k ignores the group fields it may still carry.
  if (get_string(c, "topk_method", file, "") != "greedy") {
    moe.routing.n_group = static_cast<int>(get_int(c, "n_group", file, 0));
    moe.routing.topk_group = static_cast<int>(get_int(c, "topk_group", file, 0));
    if (moe.routing.n_group == 1) moe.routing.n_group = moe.routing.topk_group = 0;
  }
  validate(moe);
  return moe;
}

int64_t int_at_least(const ordered_json& c, std::string_view key, std::string_view file,
                     int64_t fallback, int64_t least) {
  const int64_t v = get_int(c, key, file, fallback);
  check(v >= least, "{}: '{}' must be at least {}, got {}", file, key, least, v);
  return v;
}

std::vector<int> declared_moe_layers(const ordered_json& c, std::string_view file) {
  if (!find_key(c, "num_hidden_layers")) return {};
  constexpr int64_t kMaxLayers = 1 << 16;
  const int64_t layers = get_int(c, "num_hidden_layers", file);
  check(layers >= 1 && layers <= kMaxLayers, "{}: num_hidden_layers must be in 1..{}, got {}", file,
        kMaxLayers, layers);
  std::vector<int> out;
  if (const ordered_json* listed = find_key(c, "moe_layers")) {  // Llama 4
    check(listed->is_array(), "{}: 'moe_layers' must be a list of layer numbers", file);
    for (const ordered_json& l : *listed) {
      check(l.is_number_integer() && l.get<int64_t>() >= 0 && l.get<int64_t>() < layers,
            "{}: moe_layers entry {} is not a layer number in 0..{}", file, l.dump(), layers - 1);
      out.push_back(l.get<int>());
    }
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return out;
  }
  const int64_t first_moe = int_at_least(c, "first_k_dense_replace", file, 0, 0);  // DeepSeek
  const int64_t freq = int_at_least(c, "moe_layer_freq", file, 1, 1);              // DeepSeek
  const int64_t step = int_at_least(c, "decoder_sparse_step", file, 1, 1);         // Qwen-MoE
  std::vector<int64_t> dense;
  if (const ordered_json* mlp_only = find_key(c, "mlp_only_layers")) {
    check(mlp_only->is_array(), "{}: 'mlp_only_layers' must be a list of layer numbers", file);
    for (const ordered_json& l : *mlp_only) {
      check(l.is_number_integer(), "{}: mlp_only_layers entry {} is not a layer number", file,
            l.dump());
      dense.push_back(l.get<int64_t>());
    }
  }
  for (int64_t i = first_moe; i < layers; ++i) {
    if (i % freq != 0 || (i + 1) % step != 0) continue;
    if (std::find(dense.begin(), dense.end(), i) != dense.end()) continue;
    out.push_back(static_cast<int>(i));
  }
  return out;
}

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

QuantConfig parse_gptq(const ordered_json& q, std::string_view file) {
  QuantConfig c;
  c.format = CheckpointFormat::gptq;
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

QuantConfig parse_awq(const ordered_json& q, std::string_view file) {
  QuantConfig c;
  c.format = CheckpointFormat::awq;
  c.scheme.bits =
      static_cast<int>(find_key(q, "w_bit") ? get_int(q, "w_bit", file) : get_int(q, "bits", file));
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

QuantConfig parse_mxfp4(const ordered_json&, std::string_view) {
  QuantConfig c;
  c.format = CheckpointFormat::mxfp4;
  c.scheme = QuantScheme{
      .kind = WeightKind::mxfp4, .bits = 4, .group_size = 32, .source_scale_dtype = DType::u8};
  return c;
}

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

QuantConfig parse_compressed_tensors(const ordered_json& q, std::string_view file) {
  QuantConfig c;
  c.format = CheckpointFormat::compressed_tensors;
  const std::string status = get_string(q, "quantization_status", file, "compressed");
  check(status == "compressed",
        "{}: quantization_status '{}': the weights are not stored packed (valid: compressed)", file,
        status);
  const ordered_json* groups = find_key(q, "config_groups");
  check(groups && groups->is_object() && !groups->empty(), "{}: missing config_groups", file);
  const std::string top_format = get_string(q, "format", file, "pack-quantized");
  for (const auto& [group_name, group] : groups->items()) {
    const QuantScheme s = ct_scheme(group, top_format, file, group_name);
    if (group_name == groups->begin().key()) c.scheme = s;
  }
  return c;
}

// The length of the quantifier at pattern[i] (*, +, ?, {m}, {m,}, {m,n}), 0 when there is none.
size_t quantifier_at(const std::string& pattern, size_t i) {
  const char c = pattern[i];
  if (c == '*' || c == '+' || c == '?') return 1;
  if (c != '{') return 0;
  size_t j = i + 1, digits = 0;
  while (j < pattern.size() &&
         (std::isdigit(static_cast<unsigned char>(pattern[j])) || pattern[j] == ',')) {
    digits += pattern[j] != ',';
    ++j;
  }
  return j < pattern.size() && pattern[j] == '}' && digits > 0 ? j - i + 1 : 0;
}

// Python's re refuses a quantifier on a quantifier ("multiple repeat"); std::regex accepts "a**" as
// (a*)*, whose backtracking is exponential in the module name's length, so an untrusted
// config.json could hang the loader with one pattern. A lazy '?' right after a quantifier is fine.
void refuse_multiple_repeat(const std::string& pattern) {
  bool after_quantifier = false, lazy_taken = false, in_class = false;
  for (size_t i = 0; i < pattern.size();) {
    const char c = pattern[i];
    if (c == '\\' || in_class || c == '[') {
      if (c == '\\') {
        i += 2;
      } else if (in_class) {
        in_class = c != ']';
        ++i;
      } else {  // '[' opens a class; quantifier characters in it are literal
        in_class = true;
        ++i;
      }
      after_quantifier = false;
      continue;
    }
    const size_t q = quantifier_at(pattern, i);
    if (q == 0) {
      after_quantifier = false;
      ++i;
      continue;
    }
    if (after_quantifier && (c != '?' || lazy_taken))
      fail(
          "module pattern '{}' repeats a repeat at offset {} (Python's re refuses it as "
          "'multiple repeat')",
          pattern, i);
    lazy_taken = after_quantifier;  // the '?' that makes the quantifier before it lazy
    after_quantifier = true;
    i += q;
  }
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

ordered_json read_json(const std::filesystem::path& path) {
  const std::string text = read_regular_file(path, kMaxJsonBytes);
  try {
    return ordered_json::parse(text);
  } catch (const ordered_json::exception& e) {
    fail("{}: not valid JSON: {}", path.string(), e.what());
  }
}

}  // namespace

bool python_re_match(const std::string& pattern, const std::string& text) {
  refuse_multiple_repeat(pattern);
  try {
    return std::regex_search(text, std::regex(pattern), std::regex_constants::match_continuous);
  } catch (const std::regex_error& e) {
    fail("module pattern '{}' is not a regular expression qmoe can read: {}", pattern, e.what());
  }
}

std::optional<QuantScheme> QuantConfig::scheme_for(const std::string& module) const {
  switch (format) {
    case CheckpointFormat::gptq:
    case CheckpointFormat::moe_wna16: {
      const ordered_json* dynamic = find_key(raw, "dynamic");
      if (!dynamic) return scheme;
      for (const auto& [key, overrides] : dynamic->items()) {
        const bool negative = key.rfind("-:", 0) == 0;
        const std::string pattern = key.rfind("+:", 0) == 0 || negative ? key.substr(2) : key;
        if (!python_re_match(pattern, module)) continue;
        if (negative) return std::nullopt;
        check(overrides.is_object(), "GPTQ dynamic['{}'] must be an object of overrides", key);
        return gptq_scheme(overrides, fmt::format("GPTQ dynamic['{}']", key), scheme);
      }
      return scheme;
    }
    case CheckpointFormat::awq:
    case CheckpointFormat::mxfp4: {
      const ordered_json* skip = find_key(raw, "modules_to_not_convert");
      if (skip && skip->is_array()) {
        for (const ordered_json& s : *skip) {
          if (s.is_string() && module.find(s.get<std::string>()) != std::string::npos) {
            return std::nullopt;
          }
        }
      }
      return scheme;
    }
    case CheckpointFormat::compressed_tensors: {
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
  }
  return std::nullopt;
}

ModelConfig parse_model_config(const ordered_json& config, std::string_view file,
                               const ordered_json* fallback_quant) {
  check(config.is_object(), "{}: must be a JSON object", file);
  ModelConfig m;
  m.model_type = get_string(config, "model_type", file, "");
  // Multimodal models (Llama 4, Qwen-VL-MoE, ...) keep the language model's shape in text_config;
  // the quantization config stays at the top level.
  const ordered_json* text = find_key(config, "text_config");
  const ordered_json& shape = text && text->is_object() ? *text : config;
  m.moe = parse_moe(shape, file, get_string(shape, "model_type", file, m.model_type));
  m.declared_moe_layers = declared_moe_layers(shape, file);
  const ordered_json* q = find_key(config, "quantization_config");
  if (!q) q = fallback_quant;
  check(q && q->is_object(),
        "{}: no quantization_config (and no quantize_config.json): not a quantized checkpoint",
        file);
  // Older AutoGPTQ quantize_config.json files carry no quant_method.
  const std::string method =
      lower(get_string(*q, "quant_method", file,
                       q == fallback_quant ? std::optional<std::string>("gptq") : std::nullopt));
  if (method == "gptq") {
    m.quant = parse_gptq(*q, file);
  } else if (method == "awq") {
    m.quant = parse_awq(*q, file);
  } else if (method == "compressed-tensors") {
    m.quant = parse_compressed_tensors(*q, file);
  } else if (method == "mxfp4") {
    m.quant = parse_mxfp4(*q, file);
  } else {
    fail("{}: quant_method '{}' is not supported (valid: gptq, awq, compressed-tensors, mxfp4)",
         file, method);
  }
  m.quant.raw = *q;
  validate(m.quant.scheme);
  return m;
}

ModelConfig read_model_config(const std::filesystem::path& dir) {
  const std::filesystem::path config = dir / "config.json";
  check(std::filesystem::exists(config), "{}: no config.json", dir.string());
  const std::filesystem::path quantize = dir / "quantize_config.json";
  const ordered_json fallback =
      std::filesystem::exists(quantize) ? read_json(quantize) : ordered_json();
  return parse_model_config(read_json(config), config.string(),
                            fallback.is_null() ? nullptr : &fallback);
}

}  // namespace qmoe::format
