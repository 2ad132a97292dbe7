#include "format/inspect.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>

#include "qmoe/error.hpp"
#include "quant/mxfp4.hpp"

namespace qmoe::format {

namespace {

WeightStats stats(const QuantizedWeight& w) {
  WeightStats s;
  s.shape = {w.E, w.N, w.K};
  bool first = true;
  std::vector<float> scales;
  if (w.scheme.kind == WeightKind::mxfp4) {
    for (uint8_t e : w.scales.span<uint8_t>()) scales.push_back(e8m0_to_float(e));
  } else {
    const std::span<const float> f = w.scales.span<float>();
    scales.assign(f.begin(), f.end());
  }
  for (float v : scales) {  // all finite: QuantizedWeight::validate refused the others
    if (v == 0.0f) ++s.zero_scales;
    const float a = std::fabs(v);
    s.min_abs_scale = first ? a : std::min(s.min_abs_scale, a);
    s.max_abs_scale = first ? a : std::max(s.max_abs_scale, a);
    first = false;
  }
  if (w.has_bias()) {
    for (float v : w.bias.span<float>()) s.nonfinite_bias += std::isfinite(v) ? 0 : 1;
  }
  return s;
}

// Load errors start with "layer N: " themselves; the finding names the layer once.
std::string without_layer_prefix(const std::string& message, int layer) {
  const std::string prefix = fmt::format("layer {}: ", layer);
  return message.rfind(prefix, 0) == 0 ? message.substr(prefix.size()) : message;
}

void add_weight_findings(CheckpointReport& r, int layer, const char* what, const WeightStats& s) {
  if (s.nonfinite_bias > 0) {
    r.findings.push_back(
        fmt::format("layer {} {}: {} NaN/Inf bias value(s)", layer, what, s.nonfinite_bias));
    ++r.problems;
  }
  if (s.zero_scales > 0) {
    r.findings.push_back(fmt::format("layer {} {}: {} zero scale(s); those groups dequantize to 0",
                                     layer, what, s.zero_scales));
  }
}

// One line per layer however many projections overflowed; the JSON report lists them all.
void add_zero_overflow_finding(CheckpointReport& r, int layer,
                               const std::vector<GroupZeroOverflow>& overflows) {
  constexpr size_t kListed = 8;
  if (overflows.empty()) return;
  int64_t lost = 0;
  std::vector<std::string> where;
  for (const GroupZeroOverflow& o : overflows) {
    lost += o.lost_channels;
    if (where.size() < kListed) {
      where.push_back(fmt::format("expert {} {} group {} ({})", o.expert, o.projection, o.group,
                                  o.lost_channels));
    }
  }
  if (overflows.size() > kListed)
    where.push_back(fmt::format("{} more", overflows.size() - kListed));
  r.findings.push_back(fmt::format(
      "layer {}: the zero points of {} output channel(s) were overwritten by a zero point of 0 "
      "below them in their GPTQ qzeros word (AutoGPTQ stores z - 1 unmasked) and are lost; read "
      "as 0: {}",
      layer, lost, fmt::join(where, ", ")));
}

nlohmann::ordered_json to_json(const WeightStats& s) {
  return {{"shape", s.shape},
          {"zero_scales", s.zero_scales},
          {"nonfinite_bias", s.nonfinite_bias},
          {"min_abs_scale", s.min_abs_scale},
          {"max_abs_scale", s.max_abs_scale}};
}

}  // namespace

CheckpointReport inspect(const Checkpoint& checkpoint, const std::function<void()>& layer_done) {
  CheckpointReport r;
  r.dir = checkpoint.dir().string();
  r.format = std::string(checkpoint.format());
  r.model_type = std::string(checkpoint.model_type());
  switch (checkpoint.naming()) {
    case ExpertNaming::mixtral: r.naming = "mixtral (block_sparse_moe.experts.J.w1/w2/w3)"; break;
    case ExpertNaming::qwen: r.naming = "qwen (mlp.experts.J.gate_proj/up_proj/down_proj)"; break;
    case ExpertNaming::gpt_oss: r.naming = "gpt-oss (fused mlp.experts.gate_up_proj/down_proj)";
  }
  r.scheme = to_string(checkpoint.scheme());
  r.scale_dtype = std::string(name(checkpoint.scheme().source_scale_dtype));
  r.moe = checkpoint.moe_config();
  const ZeroOverflowScan zero_overflows(checkpoint.dir());
  for (int layer : checkpoint.moe_layers()) {
    LayerReport l;
    l.layer = layer;
    l.bytes = checkpoint.layer_bytes(layer);
    try {
      const QuantizedExperts x = checkpoint.load_layer(layer);
      l.w13 = stats(x.w13());
      l.w2 = stats(x.w2());
      l.has_bias = x.w13().has_bias() || x.w2().has_bias();
      add_weight_findings(r, layer, "w13", l.w13);
      add_weight_findings(r, layer, "w2", l.w2);
      l.zero_overflows = zero_overflows.layer(layer);
      add_zero_overflow_finding(r, layer, l.zero_overflows);
    } catch (const Error& e) {
      l.error = without_layer_prefix(e.what(), layer);
      r.findings.push_back(fmt::format("layer {} does not load: {}", layer, l.error));
      ++r.problems;
    }
    r.layers.push_back(std::move(l));
    if (layer_done) layer_done();
  }
  for (int layer : checkpoint.missing_layers()) {
    r.findings.push_back(fmt::format(
        "layer {} is an MoE layer by config.json but no file holds its experts", layer));
    ++r.problems;
  }
  return r;
}

nlohmann::ordered_json to_json(const CheckpointReport& r) {
  nlohmann::ordered_json layers = nlohmann::ordered_json::array();
  for (const LayerReport& l : r.layers) {
    nlohmann::ordered_json j = {{"layer", l.layer}, {"bytes", l.bytes}};
    if (l.error.empty()) {
      j["w13"] = to_json(l.w13);
      j["w2"] = to_json(l.w2);
      j["bias"] = l.has_bias;
      j["zero_overflows"] = nlohmann::ordered_json::array();
      for (const GroupZeroOverflow& o : l.zero_overflows) {
        j["zero_overflows"].push_back({{"expert", o.expert},
                                       {"projection", o.projection},
                                       {"group", o.group},
                                       {"words", o.words},
                                       {"lost_channels", o.lost_channels}});
      }
    } else {
      j["error"] = l.error;
    }
    layers.push_back(j);
  }
  return {{"dir", r.dir},
          {"format", r.format},
          {"model_type", r.model_type},
          {"naming", r.naming},
          {"scheme", r.scheme},
          {"scale_dtype", r.scale_dtype},
          {"experts", r.moe.num_experts},
          {"top_k", r.moe.top_k()},
          {"hidden", r.moe.hidden},
          {"intermediate", r.moe.intermediate},
          {"activation", std::string(name(r.moe.activation))},
          {"scoring", std::string(name(r.moe.routing.scoring))},
          {"renormalize", r.moe.routing.renormalize},
          {"n_group", r.moe.routing.n_group},
          {"topk_group", r.moe.routing.topk_group},
          {"routed_scaling_factor", r.moe.routing.routed_scaling_factor},
          {"layers", layers},
          {"findings", r.findings},
          {"problems", r.problems}};
}

}  // namespace qmoe::format
