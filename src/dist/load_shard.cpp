// One rank's slice of a checkpoint layer, reading only what the rank needs.
#include "core/check.hpp"
#include "qmoe/distributed.hpp"

namespace qmoe {

namespace {

// The part of the layer `rank` of `plan` reads (Checkpoint::load_experts).
ExpertSlice slice_of(const Checkpoint& ckpt, const ShardPlan& plan, int rank) {
  check(rank >= 0 && rank < plan.world_size(), "load_shard: rank {} is outside 0..{}", rank,
        plan.world_size() - 1);
  const MoEConfig& c = ckpt.moe_config();
  check(c.num_experts == plan.layer.num_experts && c.hidden == plan.layer.hidden &&
            c.intermediate == plan.layer.intermediate,
        "load_shard: the plan is for another layer ({}) than {}'s (E={}, H={}, I={})",
        plan.layer.to_string(), ckpt.dir().string(), c.num_experts, c.hidden, c.intermediate);
  // The files pack codes and zero points in 32-bit words. A plan made for canonical bytes
  // (word_bits 8) may cut one; planned again for the files, it is refused naming the TP sizes
  // that work.
  if (plan.spec.word_bits != 32) {
    plan_shards(
        plan.layer,
        ShardSpec{.tp_size = plan.spec.tp_size, .ep_size = plan.spec.ep_size, .word_bits = 32});
  }
  const RankShard& r = plan.ranks[static_cast<size_t>(rank)];
  return ExpertSlice{.first_expert = r.first_expert,
                     .num_experts = r.num_experts,
                     .first_channel = r.first_channel,
                     .channels = r.intermediate,
                     .w2_bias = r.w2_bias};
}

}  // namespace

QuantizedExperts load_shard(const Checkpoint& ckpt, int layer, const ShardPlan& plan, int rank) {
  return ckpt.load_experts(layer, slice_of(ckpt, plan, rank));
}

int64_t shard_bytes(const Checkpoint& ckpt, int layer, const ShardPlan& plan, int rank) {
  return ckpt.experts_bytes(layer, slice_of(ckpt, plan, rank));
}

}  // namespace qmoe
