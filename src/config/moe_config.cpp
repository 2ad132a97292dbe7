#include <array>
#include <utility>

#include "core/check.hpp"
#include "qmoe/config.hpp"

namespace qmoe {

namespace {

constexpr std::array<std::pair<Activation, std::string_view>, 9> kActivationNames{{
    {Activation::silu, "silu"},
    {Activation::gelu, "gelu"},
    {Activation::gelu_tanh, "gelu_tanh"},
    {Activation::swigluoai, "swigluoai"},
    {Activation::swigluoai_uninterleave, "swigluoai_uninterleave"},
    {Activation::silu_no_mul, "silu_no_mul"},
    {Activation::gelu_no_mul, "gelu_no_mul"},
    {Activation::gelu_tanh_no_mul, "gelu_tanh_no_mul"},
    {Activation::relu2_no_mul, "relu2_no_mul"},
}};

}  // namespace

const std::vector<Activation>& all_activations() {
  static const std::vector<Activation> all = [] {
    std::vector<Activation> list;
    for (const auto& entry : kActivationNames) list.push_back(entry.first);
    return list;
  }();
  return all;
}

bool is_gated(Activation a) {
  return a == Activation::silu || a == Activation::gelu || a == Activation::gelu_tanh ||
         a == Activation::swigluoai || a == Activation::swigluoai_uninterleave;
}

std::string_view name(Activation a) {
  for (const auto& [value, text] : kActivationNames)
    if (value == a) return text;
  return "?";
}

Activation parse_activation(std::string_view s) {
  if (s == "gelu_pytorch_tanh") return Activation::gelu_tanh;
  if (s == "swiglu") return Activation::silu;
  if (s == "relu2") return Activation::relu2_no_mul;
  std::string valid;
  for (const auto& [value, text] : kActivationNames) {
    if (text == s) return value;
    valid += fmt::format("{}{}", valid.empty() ? "" : ", ", text);
  }
  fail("unknown activation '{}' (valid: {})", s, valid);
}

std::string_view name(ActivationFormat f) {
  return f == ActivationFormat::standard ? "standard" : "batched_experts";
}

std::string_view name(Scoring s) { return s == Scoring::softmax ? "softmax" : "sigmoid"; }

void validate(const MoEConfig& c) {
  check(c.num_experts > 0 && c.hidden > 0 && c.intermediate > 0,
        "MoE config: experts ({}), hidden ({}) and intermediate ({}) must be positive",
        c.num_experts, c.hidden, c.intermediate);
  // Far above any model, yet small enough that sizes derived from them cannot overflow.
  check(c.num_experts <= kMaxExperts && c.hidden <= kMaxWidth && c.intermediate <= kMaxWidth,
        "MoE config: experts ({}), hidden ({}) or intermediate ({}) is implausibly large (limits: "
        "{} experts, {} channels)",
        c.num_experts, c.hidden, c.intermediate, kMaxExperts, kMaxWidth);
  const RoutingConfig& r = c.routing;
  check(r.top_k >= 1 && r.top_k <= c.num_experts, "MoE config: top-k {} must be in 1..{} (experts)",
        r.top_k, c.num_experts);
  check(
      r.correction_bias.empty() || static_cast<int64_t>(r.correction_bias.size()) == c.num_experts,
      "MoE config: correction bias has {} entries, expected one per expert ({})",
      r.correction_bias.size(), c.num_experts);
  if (r.n_group > 0) {
    check(c.num_experts % r.n_group == 0, "MoE config: {} groups do not divide {} experts",
          r.n_group, c.num_experts);
    check(r.topk_group >= 1 && r.topk_group <= r.n_group,
          "MoE config: topk_group {} must be in 1..{} (n_group)", r.topk_group, r.n_group);
    check(r.top_k <= r.topk_group * (c.num_experts / r.n_group),
          "MoE config: top-k {} exceeds the {} experts in the {} kept groups", r.top_k,
          r.topk_group * (c.num_experts / r.n_group), r.topk_group);
    check(r.correction_bias.empty() || c.num_experts / r.n_group >= 2,
          "MoE config: grouped top-k with a correction bias scores groups by their top-2 experts, "
          "so each group needs at least 2 experts (have {})",
          c.num_experts / r.n_group);
  } else {
    check(r.topk_group == 0, "MoE config: topk_group {} set without n_group", r.topk_group);
  }
  check(r.routed_scaling_factor > 0.0f,
        "MoE config: routed scaling factor must be positive, got {}", r.routed_scaling_factor);
  check(!c.apply_router_weight_on_input || r.top_k == 1,
        "MoE config: router weights on the input need top-k 1 (got {}); with more experts the "
        "weights would be applied before a non-linear activation",
        r.top_k);
}

}  // namespace qmoe
