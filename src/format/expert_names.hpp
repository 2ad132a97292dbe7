#pragma once
// Where a model keeps its routed experts: `{prefix}layers.{L}.mlp.experts.{j}.gate_proj` (Qwen-MoE,
// DeepSeek, ...) or `{prefix}layers.{L}.block_sparse_moe.experts.{j}.w1` (Mixtral), found by
// scanning the checkpoint's tensor names.
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
  ExpertNaming naming = ExpertNaming::qwen;
  std::map<int, int64_t> experts_per_layer;  // layer -> 1 + the largest expert index seen

  std::string expert_module(int layer, int64_t expert, Role role) const;
  std::string router_module(int layer) const;
  std::string experts_prefix(int layer) const;  // "...layers.{L}.mlp.experts."
};

// Throws Error when no expert tensors are found or the naming is mixed.
ExpertLayout find_experts(const TensorStore& store);

}  // namespace qmoe::format
