#include "format/expert_names.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <regex>

#include "core/check.hpp"

namespace qmoe::format {

namespace {

std::string_view role_name(ExpertNaming n, Role r) {
  check(n != ExpertNaming::gpt_oss, "gpt-oss experts are fused; they have no per-expert modules");
  if (n == ExpertNaming::mixtral) return r == Role::gate ? "w1" : r == Role::up ? "w3" : "w2";
  return r == Role::gate ? "gate_proj" : r == Role::up ? "up_proj" : "down_proj";
}

int parse_index(const std::string& digits, const std::string& name, const TensorStore& store) {
  check(digits.length() <= 6, "{}: tensor '{}' has a layer or expert index with more than 6 digits",
        store.dir().string(), name);
  return std::stoi(digits);
}

// Records one expert tensor, checking that every expert tensor uses the same module path.
void add(ExpertLayout& layout, bool& found, std::string& first, const std::string& name,
         const std::string& prefix, const std::string& block, ExpertNaming naming, int layer,
         int64_t experts, const TensorStore& store) {
  if (!found) {
    layout.prefix = prefix;
    layout.block = block;
    layout.naming = naming;
    first = name;
    found = true;
  }
  check(layout.prefix == prefix && layout.block == block && layout.naming == naming,
        "{}: expert tensors '{}' and '{}' use different module paths or naming",
        store.dir().string(), first, name);
  int64_t& count = layout.experts_per_layer[layer];
  count = std::max(count, experts);
}

}  // namespace

ExpertLayout written_layout(ExpertNaming naming) {
  ExpertLayout layout;
  layout.prefix = "model.";
  layout.naming = naming;
  layout.block = naming == ExpertNaming::mixtral ? "block_sparse_moe" : "mlp";
  return layout;
}

std::string ExpertLayout::experts_prefix(int layer) const {
  return fmt::format("{}layers.{}.{}.experts.", prefix, layer, block);
}

std::string ExpertLayout::expert_module(int layer, int64_t expert, Role role) const {
  return fmt::format("{}{}.{}", experts_prefix(layer), expert, role_name(naming, role));
}

std::vector<std::string> ExpertLayout::router_modules(int layer) const {
  const std::string base = fmt::format("{}layers.{}.{}.", prefix, layer, block);
  return {base + "gate", base + "router"};
}

ExpertLayout find_experts(const TensorStore& store) {
  static const std::regex per_expert(
      R"(^(.*)layers\.(\d+)\.(mlp|block_sparse_moe|feed_forward)\.experts\.(\d+)\.(w1|w2|w3|gate_proj|up_proj|down_proj)\.[A-Za-z_]+$)");
  static const std::regex fused(
      R"(^(.*)layers\.(\d+)\.mlp\.experts\.(gate_up_proj|down_proj)(_blocks|_scales|_bias)?$)");
  ExpertLayout layout;
  bool found = false;
  std::string first;
  for (const auto& [name, info] : store.tensors()) {
    // std::regex is slow; most tensors of a large model are not experts at all.
    if (name.find(".experts.") == std::string::npos) continue;
    std::smatch m;
    if (std::regex_match(name, m, fused)) {
      add(layout, found, first, name, m[1], "mlp", ExpertNaming::gpt_oss,
          parse_index(m[2], name, store), info.shape.empty() ? 0 : info.shape[0], store);
    } else if (std::regex_match(name, m, per_expert)) {
      const std::string role = m[5];
      const bool mixtral_roles = role == "w1" || role == "w2" || role == "w3";
      add(layout, found, first, name, m[1], m[3],
          mixtral_roles ? ExpertNaming::mixtral : ExpertNaming::qwen,
          parse_index(m[2], name, store), parse_index(m[4], name, store) + 1, store);
    }
  }
  check(found,
        "{}: no expert tensors (looked for "
        "'...layers.L.mlp.experts.J.gate_proj/up_proj/down_proj.*', "
        "'...layers.L.block_sparse_moe.experts.J.w1/w2/w3.*', the same under feed_forward, and the "
        "fused '...layers.L.mlp.experts.gate_up_proj_blocks')",
        store.dir().string());
  return layout;
}

}  // namespace qmoe::format
