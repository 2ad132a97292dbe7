// config.json keys, as written by transformers and the quantizers: num_local_experts (Mixtral) |
// num_experts (Qwen-MoE) | n_routed_experts (DeepSeek), num_experts_per_tok, hidden_size,
// moe_intermediate_size (else intermediate_size), hidden_act, scoring_func, n_group / topk_group /
// topk_method, norm_topk_prob, routed_scaling_factor; quantization_config goes to the method its
// quant_method names (registry.cpp), which reads the rest of it.
#include "format/model_config.hpp"

#include <algorithm>

#include "core/check.hpp"
#include "format/json_fields.hpp"
#include "format/registry.hpp"
#include "format/regular_file.hpp"

namespace qmoe::format {

namespace {

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

const FormatEntry& format_named(const std::string& quant_method, std::string_view file) {
  std::string valid;
  for (const FormatEntry& f : formats()) {
    if (!f.quant_method) continue;
    if (f.name == quant_method) return f;
    valid += fmt::format("{}{}", valid.empty() ? "" : ", ", f.name);
  }
  fail("{}: quant_method '{}' is not supported (valid: {})", file, quant_method, valid);
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

std::optional<QuantScheme> QuantConfig::scheme_for(const std::string& module) const {
  return format_entry(format).method().scheme_for(*this, module);
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
  const FormatEntry& entry = format_named(method, file);
  m.quant = entry.method().parse(*q, file);
  m.quant.format = entry.format;
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
