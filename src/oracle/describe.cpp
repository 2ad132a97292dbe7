#include <fmt/format.h>

#include <algorithm>
#include <vector>

#include "qmoe/oracle.hpp"
#include "quant/mxfp4_windows.hpp"

namespace qmoe {

namespace {

constexpr int64_t kMxfp4Window = 64;  // LayerDesc::mxfp4_window_spread

LayerDesc from_config(const MoEConfig& config) {
  LayerDesc d;
  d.num_experts = config.num_experts;
  d.hidden = config.hidden;
  d.intermediate = config.intermediate;
  d.top_k = config.top_k();
  d.activation = config.activation;
  d.w13_bias = config.w13_bias;
  d.w2_bias = config.w2_bias;
  d.apply_router_weight_on_input = config.apply_router_weight_on_input;
  d.activation_dtype = config.activation_dtype;
  d.activation_format = config.activation_format;
  return d;
}

// True when an expert's g_idx puts other than G channels into some group (whole-K weights only:
// a K-split shard holds part of every group by construction).
bool uneven_groups(const QuantizedWeight& w) {
  if (!w.scheme.act_order || (w.K_full > 0 && w.K_full != w.K)) return false;
  const int64_t G = w.scheme.group_size_for(w.K), groups = w.groups();
  std::vector<int64_t> count(static_cast<size_t>(groups));
  for (int64_t e = 0; e < w.E; ++e) {
    std::fill(count.begin(), count.end(), 0);
    for (int64_t k = 0; k < w.K; ++k) ++count[w.g_idx.data_as<int32_t>()[e * w.K + k]];
    if (std::any_of(count.begin(), count.end(), [&](int64_t c) { return c != G; })) return true;
  }
  return false;
}

}  // namespace

LayerDesc describe(const QuantizedExperts& experts, const MoEConfig& config) {
  LayerDesc d = from_config(config);
  // The schemes and shapes come from the weights themselves; group sizes are the schemes' (never
  // inferred from how scales were stored).
  d.w13_scheme = experts.w13().scheme;
  d.w2_scheme = experts.w2().scheme;
  d.num_experts = experts.num_experts();
  d.hidden = experts.hidden();
  d.intermediate = experts.intermediate();
  d.w13_bias = experts.w13().has_bias();
  d.w2_bias = experts.w2().has_bias();
  if (experts.w2().K_full > 0) d.w2_full_k = experts.w2().K_full;
  d.act_order_uneven_groups = uneven_groups(experts.w13()) || uneven_groups(experts.w2());
  d.mxfp4_window_spread = 0;
  for (const QuantizedWeight* w : {&experts.w13(), &experts.w2()})
    if (w->K % kMxfp4Window == 0)
      d.mxfp4_window_spread =
          std::max(d.mxfp4_window_spread, mxfp4_window_spread(*w, kMxfp4Window));
  return d;
}

LayerDesc describe(const QuantScheme& scheme, const MoEConfig& config) {
  LayerDesc d = from_config(config);
  d.w13_scheme = scheme;
  d.w2_scheme = scheme;
  return d;
}

std::string LayerDesc::to_string() const {
  std::string text =
      w13_scheme == w2_scheme
          ? qmoe::to_string(w13_scheme)
          : fmt::format("w13 {}, w2 {}", qmoe::to_string(w13_scheme), qmoe::to_string(w2_scheme));
  text += fmt::format(", E={} H={} I={} top-{} {}", num_experts, hidden, intermediate, top_k,
                      name(activation));
  if (has_bias()) text += w13_bias && w2_bias ? ", bias" : w13_bias ? ", w13 bias" : ", w2 bias";
  if (apply_router_weight_on_input) text += ", router weight on input";
  if (activation_dtype) text += fmt::format(", {} activations", name(*activation_dtype));
  if (activation_format != ActivationFormat::standard)
    text += fmt::format(", {} format", name(activation_format));
  if (tp_size > 1 || ep_size > 1) text += fmt::format(", shard of TP {} x EP {}", tp_size, ep_size);
  if (w2_full_k > 0 && w2_full_k != intermediate)
    text += fmt::format(" (w2 scales over the full K = {})", w2_full_k);
  return text;
}

}  // namespace qmoe
