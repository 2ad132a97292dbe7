// Running every shard of a TP x EP plan on its own (emulation backend, qmoe::MoE, forward_routed
// with ids through the rank's expert map) and summing the partial outputs gives the unsharded
// layer, for every scheme.
//
// Bound: each shard computes in f32 like the unsharded emulation forward; only the order of the
// f32 sums over K and over ranks changes, so the sum stays within f32 rounding of the float64
// reference (~1e-6 normalized for K <= 256, as in the emulation test). 1e-5 leaves margin; a
// wrong slice, a bias added twice or a lost rank gives errors of order 1e-1 (checked below).
#include <gtest/gtest.h>

#include "qmoe/error.hpp"
#include "qmoe/moe.hpp"
#include "qmoe/shard.hpp"
#include "support/moe_case.hpp"

namespace qmoe {
namespace {

using test::CaseSpec;

QuantScheme int_scheme(int bits, int group, bool zp = false, bool act_order = false) {
  return QuantScheme{.bits = bits,
                     .zero_point = zp ? ZeroPoint::explicit_ : ZeroPoint::none,
                     .group_size = group,
                     .act_order = act_order};
}

struct Scenario {
  const char* name;
  CaseSpec spec;
  ShardSpec shards;
};

void PrintTo(const Scenario& s, std::ostream* os) { *os << s.name; }

// Sum over the plan's ranks of each shard's forward, in f64, optionally leaving one rank out.
Buffer sharded_forward(const test::MoECase& c, const ShardPlan& plan, int skip_rank = -1,
                       const std::string& backend = "emulation") {
  const int64_t M = c.hidden.dim(0), H = c.config.hidden;
  Buffer sum(DType::f64, {M, H});
  std::fill_n(sum.data_as<double>(), M * H, 0.0);
  for (int rank = 0; rank < plan.world_size(); ++rank) {
    if (rank == skip_rank) continue;
    const QuantizedExperts shard = shard_experts(*c.experts, plan, rank);
    const MoE moe(shard_config(c.config, plan, rank), shard, backend);
    const LocalRouting local =
        localize_routing(plan, rank, c.topk_weights.view(), c.topk_ids.view());
    Buffer out(c.hidden.dtype(), {M, H});
    moe.forward_routed(c.hidden.view(), local.topk_weights.view(), local.topk_ids.view(),
                       out.view());
    for (int64_t i = 0; i < M * H; ++i) sum.data_as<double>()[i] += out.data_as<float>()[i];
  }
  return sum;
}

class ShardsSumToTheLayer : public testing::TestWithParam<Scenario> {};

TEST_P(ShardsSumToTheLayer, WithinF32Rounding) {
  const Scenario& s = GetParam();
  const test::MoECase c = test::make_case(s.spec);
  const ShardPlan plan = plan_shards(describe(*c.experts, c.config), s.shards);
  ASSERT_EQ(plan.world_size(), s.shards.tp_size * s.shards.ep_size);
  EXPECT_LT(test::relative_error(sharded_forward(c, plan), c.reference), 1e-5);
  // The comparison can fail: losing any one rank's part is far outside the bound.
  for (int rank = 0; rank < plan.world_size(); ++rank)
    EXPECT_GT(test::relative_error(sharded_forward(c, plan, rank), c.reference), 1e-2) << rank;
}

// The same shards on whatever the oracle picks for the host ("auto": the cpu backend, which also
// computes in f32, so the same bound holds). Where the oracle finds no automatic backend for a
// shard (mxfp4, an act-order K-split), MoE("auto") must refuse with the oracle's own message.
TEST_P(ShardsSumToTheLayer, OnTheAutomaticBackend) {
  const Scenario& s = GetParam();
  const test::MoECase c = test::make_case(s.spec);
  const ShardPlan plan = plan_shards(describe(*c.experts, c.config), s.shards);
  for (int rank = 0; rank < plan.world_size(); ++rank) {
    const QuantizedExperts shard = shard_experts(*c.experts, plan, rank);
    const MoEConfig config = shard_config(c.config, plan, rank);
    const Selection verdict = evaluate(describe(shard, config), host_cpu());
    if (!verdict.error.empty()) {
      try {
        MoE(config, shard, "auto");
        ADD_FAILURE() << "MoE(auto) accepted a shard the oracle refuses: " << verdict.error;
      } catch (const Error& e) {
        EXPECT_EQ(std::string(e.what()), verdict.error);
      }
      return;
    }
  }
  EXPECT_LT(test::relative_error(sharded_forward(c, plan, -1, "auto"), c.reference), 1e-5);
}

constexpr ShardSpec tp(int n) { return ShardSpec{.tp_size = n}; }
constexpr ShardSpec ep(int n) { return ShardSpec{.ep_size = n}; }
constexpr ShardSpec tp_ep(int t, int e) { return ShardSpec{.tp_size = t, .ep_size = e}; }

INSTANTIATE_TEST_SUITE_P(
    Schemes, ShardsSumToTheLayer,
    testing::Values(
        Scenario{"int4_g32_sym_tp2",
                 {.E = 6, .H = 128, .I = 64, .M = 9, .scheme = int_scheme(4, 32)},
                 tp(2)},
        Scenario{"int4_g32_asym_bias_tp2_ep2",
                 {.E = 8,
                  .H = 96,
                  .I = 64,
                  .M = 9,
                  .top_k = 2,
                  .scheme = int_scheme(4, 32, true),
                  .bias = true},
                 tp_ep(2, 2)},
        Scenario{"int4_channelwise_asym_tp4",
                 {.E = 4, .H = 64, .I = 64, .M = 7, .scheme = int_scheme(4, kChannelwise, true)},
                 tp(4)},
        Scenario{"int8_channelwise_tp4",
                 {.E = 5, .H = 80, .I = 64, .M = 7, .scheme = int_scheme(8, kChannelwise)},
                 tp(4)},
        // upstream #25: int8 asymmetric zero points sliced as if int4
        Scenario{
            "int8_g16_asym_bias_tp2",
            {.E = 4, .H = 64, .I = 64, .M = 7, .scheme = int_scheme(8, 16, true), .bias = true},
            tp(2)},
        Scenario{"int4_act_order_tp2_full_k_scales",
                 {.E = 4, .H = 128, .I = 64, .M = 9, .scheme = int_scheme(4, 16, false, true)},
                 tp(2)},
        Scenario{"int4_act_order_asym_bias_tp2_ep2",
                 {.E = 6,
                  .H = 64,
                  .I = 96,
                  .M = 9,
                  .scheme = int_scheme(4, 32, true, true),
                  .bias = true},
                 tp_ep(2, 2)},
        Scenario{"mxfp4_bias_tp2_ep3",
                 {.E = 6,
                  .H = 64,
                  .I = 64,
                  .M = 9,
                  .scheme = QuantScheme{.kind = WeightKind::mxfp4, .bits = 4, .group_size = 32},
                  .bias = true},
                 tp_ep(2, 3)},
        Scenario{"uneven_ep_3_of_10",
                 {.E = 10, .H = 64, .I = 32, .M = 11, .top_k = 3, .scheme = int_scheme(4, 32)},
                 ep(3)},
        Scenario{"relu2_no_mul_tp2",
                 {.E = 4,
                  .H = 64,
                  .I = 64,
                  .M = 7,
                  .scheme = int_scheme(4, 32),
                  .activation = Activation::relu2_no_mul},
                 tp(2)},
        Scenario{"swigluoai_interleaved_bias_tp2",
                 {.E = 4,
                  .H = 64,
                  .I = 64,
                  .M = 7,
                  .scheme = int_scheme(4, 32),
                  .activation = Activation::swigluoai,
                  .bias = true},
                 tp(2)},
        Scenario{"gelu_router_weight_on_input_bias_tp2",
                 {.E = 4,
                  .H = 64,
                  .I = 64,
                  .M = 7,
                  .top_k = 1,
                  .scheme = int_scheme(8, 32),
                  .activation = Activation::gelu,
                  .bias = true,
                  .router_weight_on_input = true},
                 tp(2)}));

TEST(ShardSlices, ActOrderW2KeepsFullKScalesAndGlobalGroupIds) {
  const test::MoECase c =
      test::make_case({.E = 2, .H = 64, .I = 64, .M = 1, .scheme = int_scheme(4, 16, true, true)});
  const ShardPlan plan = plan_shards(describe(*c.experts, c.config), tp(4));
  const QuantizedExperts shard = shard_experts(*c.experts, plan, 3);
  EXPECT_EQ(shard.w2().K, 16);
  EXPECT_EQ(shard.w2().K_full, 64);
  EXPECT_EQ(shard.w2().scales.dim(2), 4);  // 64 / 16 groups, every rank
  EXPECT_EQ(shard.w2().zeros.dim(2), 4);
  for (int64_t k = 0; k < 16; ++k)  // channel 48 + k of the full layer
    EXPECT_EQ(shard.w2().g_idx.data_as<int32_t>()[k],
              c.experts->w2().g_idx.data_as<int32_t>()[48 + k]);
  EXPECT_EQ(plan.rank_layer(3).w2_full_k, 64);
  EXPECT_EQ(describe(shard, shard_config(c.config, plan, 3)).w2_full_k, 64);
}

TEST(ShardSlices, W2BiasLivesOnTpRankZeroOnly) {
  const test::MoECase c = test::make_case(
      {.E = 4, .H = 64, .I = 64, .M = 1, .scheme = int_scheme(4, 32), .bias = true});
  const ShardPlan plan = plan_shards(describe(*c.experts, c.config), tp_ep(2, 2));
  for (int rank = 0; rank < plan.world_size(); ++rank) {
    const QuantizedExperts shard = shard_experts(*c.experts, plan, rank);
    EXPECT_TRUE(shard.w13().has_bias()) << rank;
    EXPECT_EQ(shard.w2().has_bias(), plan.ranks[rank].tp_rank == 0) << rank;
    EXPECT_EQ(shard_config(c.config, plan, rank).w2_bias, plan.ranks[rank].tp_rank == 0);
  }
}

}  // namespace
}  // namespace qmoe
