#include <fstream>

#include "core/check.hpp"
#include "format/adapter.hpp"
#include "format/expert_names.hpp"
#include "format/gpt_oss_mxfp4.hpp"
#include "qmoe/checkpoint.hpp"

namespace qmoe {

using format::ordered_json;
using format::Role;

namespace {

ordered_json model_config_json(const MoEConfig& c, const QuantScheme& scheme, int64_t layers,
                               const WriteOptions& options) {
  const bool mixtral = options.naming == ExpertNaming::mixtral;
  ordered_json j;
  j["model_type"] = options.model_type;
  j["hidden_size"] = c.hidden;
  j["intermediate_size"] = c.intermediate;
  j["moe_intermediate_size"] = c.intermediate;
  j[mixtral ? "num_local_experts" : "num_experts"] = c.num_experts;
  j["num_experts_per_tok"] = c.routing.top_k;
  j["num_hidden_layers"] = layers;
  j["hidden_act"] = std::string(name(c.activation));
  j["norm_topk_prob"] = c.routing.renormalize;
  j["scoring_func"] = std::string(name(c.routing.scoring));
  j["routed_scaling_factor"] = c.routing.routed_scaling_factor;
  j["n_group"] = c.routing.n_group;
  j["topk_group"] = c.routing.topk_group;
  j["quantization_config"] =
      options.format == CheckpointFormat::mxfp4
          ? ordered_json{{"quant_method", "mxfp4"},
                         {"modules_to_not_convert",
                          {"model.layers.*.self_attn", "model.layers.*.mlp.router",
                           "model.embed_tokens", "lm_head"}}}
          : format::adapter_for(options.format).quantization_config(scheme, options);
  if (options.model_type == "gpt_oss") j["swiglu_limit"] = c.activation_params.limit;
  return j;
}

void write_text(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::trunc);
  check(out.good(), "{}: cannot create", path.string());
  out << text << '\n';
  check(out.good(), "{}: write failed", path.string());
}

}  // namespace

void write_checkpoint(const std::filesystem::path& dir, const MoEConfig& config,
                      std::span<const QuantizedExperts> layers, const WriteOptions& options) {
  check(!layers.empty(), "write_checkpoint: no layers");
  check(options.format != CheckpointFormat::moe_wna16,
        "write_checkpoint: moe_wna16 is a way of reading GPTQ/AWQ; write gptq or awq");
  check(options.gptq_version == 1 || options.gptq_version == 2,
        "write_checkpoint: gptq_version must be 1 or 2, got {}", options.gptq_version);
  validate(config);
  const QuantScheme& scheme = layers[0].w13().scheme;
  const bool mxfp4 = options.format == CheckpointFormat::mxfp4;
  check(mxfp4 == (options.naming == ExpertNaming::gpt_oss),
        "write_checkpoint: mxfp4 goes with the fused gpt_oss naming and no other format does");
  const format::ExpertLayout layout = format::written_layout(options.naming);
  const bool gated = is_gated(config.activation);

  std::filesystem::create_directories(dir);
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const std::filesystem::path& p = entry.path();
    check(p.filename() != "config.json" && p.extension() != ".safetensors" &&
              p.filename() != "model.safetensors.index.json",
          "write_checkpoint: {} already holds a checkpoint ({}); write into an empty directory",
          dir.string(), p.filename().string());
  }
  std::vector<format::SafetensorsWriter> shards(1);
  for (size_t l = 0; l < layers.size(); ++l) {
    const QuantizedExperts& x = layers[l];
    check(x.w13().scheme == scheme && x.w2().scheme == scheme,
          "write_checkpoint: layer {} is {} / {}, layer 0 is {}; one checkpoint holds one scheme",
          l, to_string(x.w13().scheme), to_string(x.w2().scheme), to_string(scheme));
    check(x.num_experts() == config.num_experts && x.hidden() == config.hidden &&
              x.intermediate() == config.intermediate && x.gated() == gated,
          "write_checkpoint: layer {} has E={}, H={}, I={} ({}), the config says E={}, H={}, I={} "
          "({})",
          l, x.num_experts(), x.hidden(), x.intermediate(), x.gated() ? "gated" : "not gated",
          config.num_experts, config.hidden, config.intermediate, gated ? "gated" : "not gated");
    const int64_t I = config.intermediate, H = config.hidden;
    if (mxfp4) {
      format::write_mxfp4_layer(shards.back(), layout.experts_prefix(static_cast<int>(l)), x,
                                options);
      continue;
    }
    const format::FormatAdapter& adapter = format::adapter_for(options.format);
    for (int64_t e = 0; e < config.num_experts; ++e) {
      if (options.max_shard_bytes > 0 && shards.back().data_bytes() >= options.max_shard_bytes) {
        shards.emplace_back();
      }
      const int layer = static_cast<int>(l);
      auto put = [&](Role role, const QuantizedWeight& w, int64_t row0, int64_t rows) {
        const format::ProjectionSpec spec{layout.expert_module(layer, e, role), rows, w.K, scheme,
                                          options.gptq_version};
        adapter.write(shards.back(), spec, format::slice_projection(w, e, row0, rows), options);
      };
      if (gated) put(Role::gate, x.w13(), 0, I);
      put(Role::up, x.w13(), gated ? I : 0, I);
      put(Role::down, x.w2(), 0, H);
    }
  }

  write_text(
      dir / "config.json",
      model_config_json(config, scheme, static_cast<int64_t>(layers.size()), options).dump(2));
  if (shards.size() == 1) {
    shards[0].write(dir / "model.safetensors");
    return;
  }
  ordered_json weight_map = ordered_json::object();
  int64_t total = 0;
  for (size_t i = 0; i < shards.size(); ++i) {
    const std::string file =
        fmt::format("model-{:05d}-of-{:05d}.safetensors", i + 1, shards.size());
    shards[i].write(dir / file);
    for (const std::string& tensor : shards[i].names()) weight_map[tensor] = file;
    total += shards[i].data_bytes();
  }
  const ordered_json index = {{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}};
  write_text(dir / "model.safetensors.index.json", index.dump(2));
}

}  // namespace qmoe
