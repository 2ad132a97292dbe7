#include "format/expert_names.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <regex>

#include "core/check.hpp"

namespace qmoe::format {

namespace {

std::string_view block_name(ExpertNaming n) {
  return n == ExpertNaming::mixtral ? "block_sparse_moe" : "mlp";
}

std::string_view role_name(ExpertNaming n, Role r) {
  check(n != ExpertNaming::gpt_oss, "gpt-oss experts are fused; they have no per-expert modules");
  if (n == ExpertNaming::mixtral) return r == Role::gate ? "w1" : r == Role::up ? "w3" : "w2";
  return r == Role::gate ? "gate_proj" : r == Role::up ? "up_proj" : "down_proj";
}

// Fused gpt-oss tensors: {prefix}layers.{L}.mlp.experts.{gate_up_proj|down_proj}[_blocks|...].
bool add_fused(ExpertLayout& layout, bool& found, const std::string& name, const TensorInfo& info,
               const TensorStore& store) {
  static const std::regex fused(
      R"(^(.*)layers\.(\d+)\.mlp\.experts\.(gate_up_proj|down_proj)(_blocks|_scales|_bias)?$)");
  std::smatch m;
  if (!std::regex_match(name, m, fused)) return false;
  check(!found || (layout.naming == ExpertNaming::gpt_oss && layout.prefix == m[1].str()),
        "{}: fused expert tensor '{}' next to other expert tensors", store.dir().string(), name);
  check(m[2].length() <= 6, "{}: tensor '{}' has a layer index with more than 6 digits",
        store.dir().string(), name);
  layout.naming = ExpertNaming::gpt_oss;
  layout.prefix = m[1];
  found = true;
  int64_t& count = layout.experts_per_layer[std::stoi(m[2])];
  if (!info.shape.empty()) count = std::max(count, info.shape[0]);
  return true;
}

}  // namespace

std::string ExpertLayout::experts_prefix(int layer) const {
  return fmt::format("{}layers.{}.{}.experts.", prefix, layer, block_name(naming));
}

std::string ExpertLayout::expert_module(int layer, int64_t expert, Role role) const {
  return fmt::format("{}{}.{}", experts_prefix(layer), expert, role_name(naming, role));
}

std::string ExpertLayout::router_module(int layer) const {
  if (naming == ExpertNaming::gpt_oss) return fmt::format("{}layers.{}.mlp.router", prefix, layer);
  return fmt::format("{}layers.{}.{}.gate", prefix, layer, block_name(naming));
}

ExpertLayout find_experts(const TensorStore& store) {
  static const std::regex pattern(
      R"(^(.*)layers\.(\d+)\.(mlp|block_sparse_moe)\.experts\.(\d+)\.(w1|w2|w3|gate_proj|up_proj|down_proj)\.[A-Za-z_]+$)");
  ExpertLayout layout;
  bool found = false;
  std::string first;
  for (const auto& [name, info] : store.tensors()) {
    // std::regex is slow; most tensors of a large model are not experts at all.
    if (name.find(".experts.") == std::string::npos) continue;
    if (add_fused(layout, found, name, info, store)) continue;
    std::smatch m;
    if (!std::regex_match(name, m, pattern)) continue;
    const bool mixtral = m[3] == "block_sparse_moe";
    const std::string role = m[5];
    const bool mixtral_roles = role == "w1" || role == "w2" || role == "w3";
    check(mixtral == mixtral_roles,
          "{}: tensor '{}' mixes naming schemes (block_sparse_moe goes with w1/w2/w3, mlp with "
          "gate_proj/up_proj/down_proj)",
          store.dir().string(), name);
    const ExpertNaming naming = mixtral ? ExpertNaming::mixtral : ExpertNaming::qwen;
    if (!found) {
      layout.prefix = m[1];
      layout.naming = naming;
      first = name;
      found = true;
    }
    check(layout.prefix == m[1].str() && layout.naming == naming,
          "{}: expert tensors '{}' and '{}' use different module paths", store.dir().string(),
          first, name);
    check(m[2].length() <= 6 && m[4].length() <= 6,
          "{}: tensor '{}' has a layer or expert index with more than 6 digits",
          store.dir().string(), name);
    const int layer = std::stoi(m[2]);
    const int64_t expert = std::stoll(m[4]);
    int64_t& count = layout.experts_per_layer[layer];
    count = std::max(count, expert + 1);
  }
  check(
      found,
      "{}: no expert tensors (looked for '...layers.L.mlp.experts.J.gate_proj/up_proj/down_proj.*' "
      "and '...layers.L.block_sparse_moe.experts.J.w1/w2/w3.*')",
      store.dir().string());
  return layout;
}

}  // namespace qmoe::format
