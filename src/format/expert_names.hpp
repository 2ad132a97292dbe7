#pragma once
// Where a model keeps its routed experts, found by scanning the checkpoint's tensor names:
//   {prefix}layers.{L}.{block}.experts.{j}.gate_proj / up_proj / down_proj   (Qwen-MoE, DeepSeek)
//   {prefix}layers.{L}.{block}.experts.{j}.w1 / w3 / w2                     (Mixtral, LFM2)
//   {prefix}layers.{L}.mlp.experts.gate_up_proj_blocks, down_proj_blocks     (gpt-oss, fused)
// with block = mlp, block_sparse_moe (Mixtral) or feed_forward (Llama 4, Jamba, LFM2).
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "format/safetensors.hpp"
#include "qmoe/checkpoint.hpp"

namespace qmoe::format {

enum class Role : uint8_t { gate, up, down };

struct ExpertLayout {
  std::string prefix;  // e.g. "model."
  std::string block = "mlp";
  ExpertNaming naming = ExpertNaming::qwen;
  std::map<int, int64_t> experts_per_layer;  // layer -> 1 + the largest expert index seen

  std::string expert_module(int layer, int64_t expert, Role role) const;
  // The router is `{block}.gate` (Qwen, DeepSeek, Mixtral) or `{block}.router` (gpt-oss,
  // Llama 4); both are checked.
  std::vector<std::string> router_modules(int layer) const;
  std::string experts_prefix(int layer) const;  // "...layers.{L}.{block}.experts."
};

// The layout qmoe writes: block_sparse_moe for Mixtral naming, mlp otherwise.
ExpertLayout written_layout(ExpertNaming naming);

// Throws Error when no expert tensors are found or the naming is mixed.
ExpertLayout find_experts(const TensorStore& store);

}  // namespace qmoe::format
