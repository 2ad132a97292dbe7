// The planner's rules: what cannot be sharded is refused with the sizes that would work, what can
// is laid out as documented in qmoe/shard.hpp.
#include <gtest/gtest.h>

#include "qmoe/shard.hpp"
#include "support/expect_error.hpp"

namespace qmoe {
namespace {

using test::expect_error;

LayerDesc layer(int bits, int group, bool zp, bool act_order, int64_t I, int64_t E = 8,
                int top_k = 2) {
  LayerDesc l;
  l.w13_scheme = l.w2_scheme =
      QuantScheme{.bits = bits,
                  .zero_point = zp ? ZeroPoint::explicit_ : ZeroPoint::none,
                  .group_size = group,
                  .act_order = act_order};
  l.num_experts = E;
  l.hidden = 256;
  l.intermediate = I;
  l.top_k = top_k;
  return l;
}

ShardSpec tp(int n, int word_bits = 32) { return ShardSpec{.tp_size = n, .word_bits = word_bits}; }

// Upstream #11: a TP split that cuts a 32-bit word of packed zero points.
TEST(ShardPlan, TpSizesThatSplitPackedZeroPointsAreRefusedWithTheValidSizes) {
  const LayerDesc asym = layer(4, kChannelwise, true, false, 24);
  expect_error([&] { plan_shards(asym, tp(2)); },
               "w13's zero points are packed 8 per 32-bit word along N; 12 rows per half would "
               "split a packed word of zero points between ranks. TP sizes that work: 1, 3");
  EXPECT_EQ(plan_shards(asym, tp(3)).ranks.at(2).first_channel, 16);
  // int8 packs 4 per word: I/tp = 12 is fine there.
  EXPECT_NO_THROW(plan_shards(layer(8, kChannelwise, true, false, 24), tp(2)));
}

TEST(ShardPlan, SymmetricCodesMayNotSplitAPackedWordEither) {
  expect_error([&] { plan_shards(layer(4, kChannelwise, false, false, 24), tp(2)); },
               "4-bit codes are packed 8 per 32-bit word; a slice of 12 channels");
  // In qmoe's own bytes (two 4-bit codes per byte) the same split is fine, but not an odd one.
  EXPECT_NO_THROW(plan_shards(layer(4, kChannelwise, false, false, 24), tp(2, 8)));
  expect_error([&] { plan_shards(layer(4, kChannelwise, false, false, 24), tp(24, 8)); },
               "packed 2 per 8-bit word");
}

TEST(ShardPlan, W2SlicesMustHoldWholeGroups) {
  expect_error([&] { plan_shards(layer(4, 128, false, false, 768), tp(4)); },
               "each rank's K slice of w2 (192 channels) would cut a quantization group of 128. "
               "TP sizes that work: 1, 2, 3, 6");
}

TEST(ShardPlan, ActOrderKeepsFullKScalesInsteadOfNeedingWholeGroups) {
  const ShardPlan plan = plan_shards(layer(4, 128, false, true, 768), tp(4));
  EXPECT_EQ(plan.ranks.at(1).intermediate, 192);
  EXPECT_EQ(plan.rank_layer(1).w2_full_k, 768);
  EXPECT_EQ(plan_shards(layer(4, 128, false, true, 768), tp(1)).rank_layer(0).w2_full_k, 0);
}

TEST(ShardPlan, UnevenSplitsAndTooManyRanksAreRefused) {
  expect_error([&] { plan_shards(layer(8, kChannelwise, false, false, 768), tp(5)); },
               "I = 768 does not split evenly");
  expect_error([&] { plan_shards(layer(8, kChannelwise, false, false, 8), tp(16)); },
               "there are only I = 8 intermediate channels");
  expect_error([&] { plan_shards(layer(4, 32, false, false, 64), ShardSpec{.tp_size = 0}); },
               "must be at least 1");
}

TEST(ShardPlan, EveryEpRankNeedsTopKExperts) {
  const LayerDesc l = layer(4, 32, false, false, 64, 8, 2);
  expect_error([&] { plan_shards(l, ShardSpec{.ep_size = 8}); },
               "every rank must hold at least top-k = 2 experts (a shard is a MoE layer of its "
               "own). EP sizes that work: 1, 2, 3, 4");
  expect_error([&] { plan_shards(l, ShardSpec{.ep_size = 9}); },
               "cannot split 8 experts over EP 9");
}

TEST(ShardPlan, ExpertsAreContiguousBlocksWithTheRemainderFirst) {
  const ShardPlan plan =
      plan_shards(layer(4, 32, false, false, 64, 10, 2), ShardSpec{.ep_size = 3});
  ASSERT_EQ(plan.world_size(), 3);
  EXPECT_EQ(plan.ranks[0].num_experts, 4);
  EXPECT_EQ(plan.ranks[1].first_expert, 4);
  EXPECT_EQ(plan.ranks[1].num_experts, 3);
  EXPECT_EQ(plan.ranks[2].first_expert, 7);
  const std::vector<int32_t> expected{-1, -1, -1, -1, 0, 1, 2, -1, -1, -1};
  EXPECT_EQ(plan.expert_map(1), expected);
  expect_error([&] { (void)plan.expert_map(3); }, "rank 3 is outside 0..2");
}

TEST(ShardPlan, RanksAreEpMajorAndOnlyTpRankZeroAddsW2Bias) {
  LayerDesc l = layer(4, 32, false, false, 64);
  l.w13_bias = l.w2_bias = true;
  const ShardPlan plan = plan_shards(l, ShardSpec{.tp_size = 2, .ep_size = 2});
  ASSERT_EQ(plan.world_size(), 4);
  for (const RankShard& r : plan.ranks) {
    EXPECT_EQ(r.rank, r.ep_rank * 2 + r.tp_rank);
    EXPECT_EQ(r.first_channel, r.tp_rank * 32);
    EXPECT_EQ(r.first_expert, r.ep_rank * 4);
    EXPECT_EQ(r.w2_bias, r.tp_rank == 0);
    EXPECT_EQ(plan.rank_layer(r.rank).w2_bias, r.tp_rank == 0);
    EXPECT_TRUE(plan.rank_layer(r.rank).w13_bias);
  }
}

TEST(ShardPlan, PlansTheWholeLayerNotAShard) {
  LayerDesc shard = layer(4, 32, false, false, 64);
  shard.tp_size = 2;
  expect_error([&] { plan_shards(shard, tp(2)); }, "takes the whole layer");
}

}  // namespace
}  // namespace qmoe
