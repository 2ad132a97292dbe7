#include "bench_layer.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <random>
#include <vector>

#include "command.hpp"
#include "qmoe/checkpoint.hpp"
#include "sample/random_moe.hpp"
#include "scheme_flag.hpp"

namespace qmoe::cli {

BenchLayer make_bench_layer(const LayerSource& o) {
  if (!o.dir.empty()) {
    if (!o.shape.empty()) usage_error("give a checkpoint directory or --shape, not both");
    const Checkpoint ckpt = Checkpoint::open(o.dir, o.open.options());
    const int layer = ckpt.moe_layers().front();
    return {fmt::format("{} layer {}", o.dir, layer), ckpt.layer_config(layer),
            ckpt.load_layer(layer)};
  }
  std::vector<int64_t> v;
  const std::string shape = o.shape.empty() ? "2048,768,32,8" : o.shape;
  for (size_t at = 0; at <= shape.size();) {
    const size_t comma = std::min(shape.find(',', at), shape.size());
    try {
      size_t used = 0;
      v.push_back(std::stoll(shape.substr(at, comma - at), &used));
      if (used != comma - at) v.push_back(-1);
    } catch (const std::exception&) {
      v.push_back(-1);
    }
    at = comma + 1;
  }
  if (v.size() != 4 || *std::min_element(v.begin(), v.end()) < 1)
    usage_error("--shape '{}': expected H,I,E,TOPK (positive integers, e.g. 2048,768,128,8)",
                shape);
  BenchLayer l;
  l.config.hidden = v[0];
  l.config.intermediate = v[1];
  l.config.num_experts = v[2];
  l.config.routing.top_k = static_cast<int>(v[3]);
  l.config.routing.renormalize = true;
  parse_flag([&] { validate(l.config); });
  const QuantScheme scheme = parse_scheme_flag(o.scheme);
  if (scheme.kind != WeightKind::integer || scheme.act_order)
    usage_error("--scheme {}: --shape takes integer schemes without act-order", o.scheme);
  for (const int64_t K : {l.config.hidden, l.config.intermediate}) {
    if (K % scheme.group_size_for(K) != 0 || (scheme.bits == 4 && K % 2 != 0))
      usage_error("--shape {}: the group size {} must divide H and I", shape,
                  scheme.group_size_for(K));
  }
  std::mt19937_64 rng(o.seed);
  l.source = fmt::format("random {} layer", to_string(scheme));
  l.experts.emplace(sample::random_codes_weight(l.config.num_experts, l.config.w13_rows(),
                                                l.config.hidden, scheme, rng),
                    sample::random_codes_weight(l.config.num_experts, l.config.hidden,
                                                l.config.intermediate, scheme, rng));
  return l;
}

void add_layer_flags(CLI::App& cmd, LayerSource& source) {
  cmd.add_option("dir", source.dir, "Checkpoint directory: use its first MoE layer");
  cmd.add_option("--shape", source.shape,
                 "H,I,E,TOPK of a random layer (default 2048,768,32,8 without DIR)");
  cmd.add_option("--scheme", source.scheme, "Scheme of the random layer")->capture_default_str();
  add_open_flags(cmd, source.open);
  cmd.add_option("--seed", source.seed, "Random seed")->capture_default_str();
}

}  // namespace qmoe::cli
