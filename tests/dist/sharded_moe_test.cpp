// ShardedMoE over in-process ranks (local_communicators: one thread per rank): every rank's
// output equals the unsharded layer's, for TP, EP, both, in the replicated-token form
// (all-reduce) and the token-split form (all-gather, reduce-scatter).
//
// Truth: the unsharded layer on the same backend (cpu, f32 activations). Each rank's partial
// output is an f32 sum over its experts' channels; the ranks' partials are added in f32, so the
// only difference is the order of f32 additions: ~1e-7 normalized; the bound is 1e-5. A rank
// left out, a bias added twice or a token routed to the wrong rows is off by 1e-2 or more.
#include <gtest/gtest.h>

#include <atomic>
#include <vector>

#include "qmoe/distributed.hpp"
#include "qmoe/error.hpp"
#include "support/moe_case.hpp"
#include "support/on_every_rank.hpp"

namespace qmoe {
namespace {

using test::on_every_rank;

struct Case {
  const char* name;
  test::CaseSpec spec;
  ShardSpec shards;
  const char* backend = "cpu";  // the ranks' and the whole layer's
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

class ShardedMoEMatchesTheLayer : public testing::TestWithParam<Case> {};

TEST_P(ShardedMoEMatchesTheLayer, TokensReplicated) {
  const Case& c = GetParam();
  const test::MoECase x = test::make_case(c.spec);
  const MoE whole(x.config, *x.experts, c.backend);
  Buffer want(DType::f32, {c.spec.M, c.spec.H});
  whole.forward(x.hidden.view(), x.router_logits.view(), want.view());

  const ShardPlan plan = plan_shards(describe(*x.experts, x.config), c.shards);
  const auto comms = local_communicators(plan.world_size());
  std::vector<Buffer> outs;
  for (int r = 0; r < plan.world_size(); ++r)
    outs.emplace_back(DType::f32, std::initializer_list<int64_t>{c.spec.M, c.spec.H});
  on_every_rank(plan.world_size(), [&](int r) {
    const ShardedMoE rank(x.config, *x.experts, plan, *comms[size_t(r)], c.backend);
    rank.forward(x.hidden.view(), x.router_logits.view(), outs[size_t(r)].view());
  });
  for (int r = 0; r < plan.world_size(); ++r)
    EXPECT_LT(test::relative_error(outs[size_t(r)], want.clone()), 1e-5) << "rank " << r;
}

TEST_P(ShardedMoEMatchesTheLayer, TokensSplitOverRanks) {
  const Case& c = GetParam();
  // M tokens per rank: the layer's batch is world x M, rank r holds rows [r M, (r + 1) M).
  test::CaseSpec spec = c.spec;
  const int world = c.shards.tp_size * c.shards.ep_size;
  spec.M *= world;
  const test::MoECase x = test::make_case(spec);
  const ShardPlan plan = plan_shards(describe(*x.experts, x.config), c.shards);
  const MoE whole(x.config, *x.experts, c.backend);
  Buffer want(DType::f32, {spec.M, spec.H});
  whole.forward(x.hidden.view(), x.router_logits.view(), want.view());

  const auto comms = local_communicators(world);
  const int64_t n = c.spec.M, H = spec.H, E = spec.E;
  Buffer out(DType::f32, {spec.M, H});
  on_every_rank(world, [&](int r) {
    const ShardedMoE rank(x.config, *x.experts, plan, *comms[size_t(r)], c.backend);
    TensorView hidden(const_cast<float*>(x.hidden.data_as<float>()) + r * n * H, DType::f32,
                      {n, H});
    TensorView logits(const_cast<float*>(x.router_logits.data_as<float>()) + r * n * E, DType::f32,
                      {n, E});
    TensorView mine(out.data_as<float>() + r * n * H, DType::f32, {n, H});
    rank.forward_token_split(hidden, logits, mine);
  });
  EXPECT_LT(test::relative_error(out, want.clone()), 1e-5);
}

TEST_P(ShardedMoEMatchesTheLayer, TokensDispatchedToTheirExperts) {
  const Case& c = GetParam();
  // Uneven token counts: rank r holds rows [b(r), b(r + 1)) with b(r) = total r^2 / world^2, so
  // rank 0 holds none.
  const int world = c.shards.tp_size * c.shards.ep_size;
  test::CaseSpec spec = c.spec;
  spec.M *= world;
  const test::MoECase x = test::make_case(spec);
  const ShardPlan plan = plan_shards(describe(*x.experts, x.config), c.shards);
  const MoE whole(x.config, *x.experts, c.backend);
  Buffer want(DType::f32, {spec.M, spec.H});
  whole.forward(x.hidden.view(), x.router_logits.view(), want.view());

  const auto comms = local_communicators(world);
  const int64_t H = spec.H, E = spec.E;
  auto first_row = [&](int r) { return spec.M * r * r / (world * world); };
  Buffer out(DType::f32, {spec.M, H});
  on_every_rank(world, [&](int r) {
    const ShardedMoE rank(x.config, *x.experts, plan, *comms[size_t(r)], c.backend);
    const int64_t first = first_row(r), n = first_row(r + 1) - first;
    TensorView hidden(const_cast<float*>(x.hidden.data_as<float>()) + first * H, DType::f32,
                      {n, H});
    TensorView logits(const_cast<float*>(x.router_logits.data_as<float>()) + first * E, DType::f32,
                      {n, E});
    TensorView mine(out.data_as<float>() + first * H, DType::f32, {n, H});
    rank.forward_dispatch(hidden, logits, mine);
  });
  EXPECT_LT(test::relative_error(out, want.clone()), 1e-5);
}

INSTANTIATE_TEST_SUITE_P(
    Plans, ShardedMoEMatchesTheLayer,
    testing::Values(
        Case{"tp2_int4_g32",
             {.E = 6, .H = 128, .I = 64, .M = 5, .scheme = test::scheme(4, 32)},
             ShardSpec{.tp_size = 2}},
        Case{"ep2_odd_experts_asym_bias",
             {.E = 7,
              .H = 96,
              .I = 64,
              .M = 6,
              .top_k = 2,
              .scheme = test::scheme(4, 32, true),
              .bias = true},
             ShardSpec{.ep_size = 2}},
        Case{"tp2_ep2_act_order_bias",
             {.E = 6,
              .H = 64,
              .I = 96,
              .M = 4,
              .scheme = test::scheme(4, 32, true, true),
              .bias = true},
             ShardSpec{.tp_size = 2, .ep_size = 2},
             "emulation"},  // the cpu backend takes no K-split act-order w2
        Case{"ep4_one_token_most_ranks_idle",
             {.E = 8, .H = 64, .I = 64, .M = 1, .top_k = 1, .scheme = test::scheme(8, 32)},
             ShardSpec{.ep_size = 4}},
        Case{"tp4_int8_channelwise",
             {.E = 4, .H = 64, .I = 128, .M = 3, .scheme = test::scheme(8, kChannelwise)},
             ShardSpec{.tp_size = 4}},
        Case{"ep2_mxfp4_swigluoai_bias",
             {.E = 4,
              .H = 64,
              .I = 64,
              .M = 5,
              .top_k = 2,
              .scheme = QuantScheme{.kind = WeightKind::mxfp4, .bits = 4, .group_size = 32},
              .activation = Activation::swigluoai,
              .bias = true},
             ShardSpec{.ep_size = 2}}),
    [](const testing::TestParamInfo<Case>& p) { return std::string(p.param.name); });

// Rank 0's partial output alone (rank 1's part never added) is far outside the bound: the
// comparison above can fail.
TEST(ShardedMoE, ALostRankIsOutsideTheBound) {
  const test::MoECase x =
      test::make_case({.E = 6, .H = 64, .I = 64, .M = 4, .scheme = test::scheme(4, 32)});
  const MoE whole(x.config, *x.experts, "cpu");
  Buffer want(DType::f32, {4, 64}), got(DType::f32, {4, 64});
  whole.forward(x.hidden.view(), x.router_logits.view(), want.view());
  const ShardPlan plan = plan_shards(describe(*x.experts, x.config), ShardSpec{.tp_size = 2});
  const MoE rank0(shard_config(x.config, plan, 0), shard_experts(*x.experts, plan, 0), "cpu");
  rank0.forward(x.hidden.view(), x.router_logits.view(), got.view());
  EXPECT_GT(test::relative_error(got, want.clone()), 1e-2);
}

TEST(ShardedMoE, RefusesAWorldThatIsNotThePlans) {
  const test::MoECase x =
      test::make_case({.E = 6, .H = 64, .I = 64, .M = 4, .scheme = test::scheme(4, 32)});
  const ShardPlan plan = plan_shards(describe(*x.experts, x.config), ShardSpec{.tp_size = 2});
  const auto comms = local_communicators(3);
  try {
    ShardedMoE(x.config, *x.experts, plan, *comms[0], "cpu");
    FAIL() << "no Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("has 3 ranks but the plan (tp 2 x ep 1) needs 2"),
              std::string::npos)
        << e.what();
  }
}

TEST(LocalCommunicators, MismatchedSizesFailOnEveryRankInsteadOfHanging) {
  const auto comms = local_communicators(2);
  std::vector<float> a(4, 1.0f), b(5, 1.0f);
  std::atomic<int> errors = 0;
  on_every_rank(2, [&](int r) {
    try {
      std::vector<float>& mine = r == 0 ? a : b;
      comms[size_t(r)]->all_reduce_sum(TensorView(mine.data(), DType::f32, {int64_t(mine.size())}));
    } catch (const Error&) {
      ++errors;
    }
  });
  EXPECT_EQ(errors, 2);
}

// Rank r sends r + d rows to rank d, each row (r, d, i): every rank receives, rank after rank,
// exactly the rows addressed to it, and a count that disagrees fails on every rank.
TEST(LocalCommunicators, AllToAllMovesEachRanksRowsToTheirRank) {
  constexpr int kRanks = 3;
  const auto comms = local_communicators(kRanks);
  std::vector<std::vector<int32_t>> received(kRanks);
  std::vector<std::vector<int64_t>> exchanged(kRanks);
  on_every_rank(kRanks, [&](int r) {
    Communicator& c = *comms[size_t(r)];
    std::vector<int64_t> send_rows;
    std::vector<int32_t> rows;
    for (int d = 0; d < kRanks; ++d) {
      send_rows.push_back(r + d);
      for (int i = 0; i < r + d; ++i) rows.insert(rows.end(), {r, d, i});
    }
    exchanged[size_t(r)] = c.exchange_counts(send_rows);
    int64_t total = 0;
    for (int64_t n : exchanged[size_t(r)]) total += n;
    received[size_t(r)].assign(size_t(total * 3), -1);
    c.all_to_all(TensorView(rows.data(), DType::i32, {int64_t(rows.size() / 3), 3}), send_rows,
                 TensorView(received[size_t(r)].data(), DType::i32, {total, 3}),
                 exchanged[size_t(r)]);
  });
  for (int d = 0; d < kRanks; ++d) {
    std::vector<int32_t> want;
    for (int r = 0; r < kRanks; ++r) {
      EXPECT_EQ(exchanged[size_t(d)][size_t(r)], r + d);
      for (int i = 0; i < r + d; ++i) want.insert(want.end(), {r, d, i});
    }
    EXPECT_EQ(received[size_t(d)], want) << "rank " << d;
  }

  std::atomic<int> errors = 0;
  const auto two = local_communicators(2);
  on_every_rank(2, [&](int r) {
    std::vector<float> row(4, 1.0f), in(8, 0.0f);
    const std::vector<int64_t> send_rows{1, 1};
    const std::vector<int64_t> recv_rows{1, r == 0 ? 0 : 1};  // rank 0 expects too little
    try {
      two[size_t(r)]->all_to_all(TensorView(row.data(), DType::f32, {2, 2}), send_rows,
                                 TensorView(in.data(), DType::f32, {1 + recv_rows[1], 2}),
                                 recv_rows);
    } catch (const Error&) {
      ++errors;
    }
  });
  EXPECT_EQ(errors, 2);
}

TEST(LocalCommunicators, SumsGathersAndScattersInRankOrder) {
  const auto comms = local_communicators(3);
  std::vector<std::vector<float>> reduced(3), gathered(3, std::vector<float>(6)),
      scattered(3, std::vector<float>(2));
  on_every_rank(3, [&](int r) {
    Communicator& c = *comms[size_t(r)];
    reduced[size_t(r)] = {float(r), float(10 * r)};
    c.all_reduce_sum(TensorView(reduced[size_t(r)].data(), DType::f32, {2}));
    std::vector<float> mine = {float(r), float(r) + 0.5f};
    c.all_gather(TensorView(mine.data(), DType::f32, {2}),
                 TensorView(gathered[size_t(r)].data(), DType::f32, {6}));
    std::vector<float> all = {1, 2, 3, 4, 5, 6};
    for (float& v : all) v *= float(r + 1);
    c.reduce_scatter_sum(TensorView(all.data(), DType::f32, {6}),
                         TensorView(scattered[size_t(r)].data(), DType::f32, {2}));
  });
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(reduced[size_t(r)], (std::vector<float>{3, 30}));
    EXPECT_EQ(gathered[size_t(r)], (std::vector<float>{0, 0.5f, 1, 1.5f, 2, 2.5f}));
    // sum over ranks of (r + 1) * [1..6] = 6 * [1..6]; rank r keeps elements 2r, 2r + 1.
    EXPECT_EQ(scattered[size_t(r)],
              (std::vector<float>{6.0f * float(2 * r + 1), 6.0f * float(2 * r + 2)}));
  }
}

}  // namespace
}  // namespace qmoe
