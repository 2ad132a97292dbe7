// One rank's slice of a checkpoint layer, reading only what the rank needs.
#include "core/check.hpp"
#include "qmoe/distributed.hpp"

namespace qmoe {

QuantizedExperts load_shard(const Checkpoint& ckpt, int layer, const ShardPlan& plan, int rank) {
  check(rank >= 0 && rank < plan.world_size(), "load_shard: rank {} is outside 0..{}", rank,
        plan.world_size() - 1);
  const RankShard& r = plan.ranks[static_cast<size_t>(rank)];
  const QuantizedExperts mine = ckpt.load_experts(layer, r.first_expert, r.num_experts);
  // The same cut of channels over the rank's experts alone: a TP-only plan of those experts.
  LayerDesc local = plan.layer;
  local.num_experts = r.num_experts;
  const ShardSpec tp_only{.tp_size = plan.spec.tp_size, .word_bits = plan.spec.word_bits};
  return shard_experts(mine, plan_shards(local, tp_only), r.tp_rank);
}

}  // namespace qmoe
