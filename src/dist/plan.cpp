#include <fmt/format.h>

#include <optional>

#include "core/check.hpp"
#include "qmoe/shard.hpp"

namespace qmoe {

namespace {

constexpr int kLargestTpListed = 64;

// Why `tp` ranks cannot split the intermediate dimension, or nullopt. Only TP-dependent rules.
std::optional<std::string> tp_problem(const LayerDesc& l, int tp, int word_bits) {
  const int64_t I = l.intermediate;
  if (tp > I) return fmt::format("there are only I = {} intermediate channels", I);
  if (I % tp != 0) return fmt::format("I = {} does not split evenly", I);
  const int64_t slice = I / tp;
  const QuantScheme& w2 = l.w2_scheme;
  // w2 is split on K: a rank's K slice must hold whole groups, unless the scales stay full-K
  // (act-order) or there is one group per row (channelwise).
  if (!w2.act_order && w2.group_size != kChannelwise && slice % w2.group_size != 0) {
    return fmt::format(
        "each rank's K slice of w2 ({} channels) would cut a quantization group of {}", slice,
        w2.group_size);
  }
  for (const QuantScheme* s : {&l.w13_scheme, &l.w2_scheme}) {
    const int per_word = word_bits / s->bits;
    if (slice % per_word == 0) continue;
    if (s->has_zero_points() && s == &l.w13_scheme) {
      return fmt::format(
          "w13's zero points are packed {} per {}-bit word along N; {} rows per half would split "
          "a packed word of zero points between ranks",
          per_word, word_bits, slice);
    }
    return fmt::format(
        "{}-bit codes are packed {} per {}-bit word; a slice of {} channels would split a packed "
        "word between ranks",
        s->bits, per_word, word_bits, slice);
  }
  return std::nullopt;
}

std::string working_tp_sizes(const LayerDesc& l, int word_bits) {
  std::string list;
  for (int tp = 1; tp <= kLargestTpListed; ++tp)
    if (!tp_problem(l, tp, word_bits)) list += fmt::format("{}{}", list.empty() ? "" : ", ", tp);
  return list.empty() ? std::string("none") : list;
}

std::string working_ep_sizes(const LayerDesc& l) {
  std::string list;
  for (int64_t ep = 1; ep <= l.num_experts; ++ep)
    if (l.num_experts / ep >= l.top_k) list += fmt::format("{}{}", list.empty() ? "" : ", ", ep);
  return list;
}

}  // namespace

ShardPlan plan_shards(const LayerDesc& layer, const ShardSpec& spec) {
  check(spec.tp_size >= 1 && spec.ep_size >= 1, "TP ({}) and EP ({}) sizes must be at least 1",
        spec.tp_size, spec.ep_size);
  check(spec.word_bits == 8 || spec.word_bits == 32,
        "shard word size must be 8 (canonical bytes) or 32 (checkpoint words), got {}",
        spec.word_bits);
  check(layer.tp_size == 1 && layer.ep_size == 1 && layer.w2_full_k == 0,
        "plan_shards takes the whole layer, not a shard of one ({})", layer.to_string());
  if (std::optional<std::string> problem = tp_problem(layer, spec.tp_size, spec.word_bits)) {
    fail("cannot split this layer ({}) over TP {}: {}. TP sizes that work: {}", layer.to_string(),
         spec.tp_size, *problem, working_tp_sizes(layer, spec.word_bits));
  }
  // A shard runs as a MoE of its own, whose config needs top-k <= its experts.
  check(spec.ep_size <= layer.num_experts && layer.num_experts / spec.ep_size >= layer.top_k,
        "cannot split {} experts over EP {}: every rank must hold at least top-k = {} experts "
        "(a shard is a MoE layer of its own). EP sizes that work: {}",
        layer.num_experts, spec.ep_size, layer.top_k, working_ep_sizes(layer));

  ShardPlan plan{layer, spec, {}};
  const int64_t slice = layer.intermediate / spec.tp_size;
  const int64_t base = layer.num_experts / spec.ep_size, extra = layer.num_experts % spec.ep_size;
  for (int ep = 0; ep < spec.ep_size; ++ep) {
    const int64_t first = ep * base + std::min<int64_t>(ep, extra);
    const int64_t count = base + (ep < extra ? 1 : 0);
    for (int tp = 0; tp < spec.tp_size; ++tp) {
      plan.ranks.push_back(RankShard{.rank = ep * spec.tp_size + tp,
                                     .tp_rank = tp,
                                     .ep_rank = ep,
                                     .first_expert = first,
                                     .num_experts = count,
                                     .first_channel = tp * slice,
                                     .intermediate = slice,
                                     .w2_bias = layer.w2_bias && tp == 0});
    }
  }
  return plan;
}

std::vector<int32_t> ShardPlan::expert_map(int rank) const {
  check(rank >= 0 && rank < world_size(), "rank {} is outside 0..{}", rank, world_size() - 1);
  const RankShard& r = ranks[static_cast<size_t>(rank)];
  std::vector<int32_t> map(static_cast<size_t>(layer.num_experts), -1);
  for (int64_t e = 0; e < r.num_experts; ++e)
    map[static_cast<size_t>(r.first_expert + e)] = static_cast<int32_t>(e);
  return map;
}

LayerDesc ShardPlan::rank_layer(int rank) const {
  check(rank >= 0 && rank < world_size(), "rank {} is outside 0..{}", rank, world_size() - 1);
  const RankShard& r = ranks[static_cast<size_t>(rank)];
  LayerDesc d = layer;
  d.num_experts = r.num_experts;
  d.intermediate = r.intermediate;
  d.w2_bias = r.w2_bias;
  d.tp_size = spec.tp_size;
  d.ep_size = spec.ep_size;
  if (layer.w2_scheme.act_order && spec.tp_size > 1) d.w2_full_k = layer.intermediate;
  return d;
}

}  // namespace qmoe
