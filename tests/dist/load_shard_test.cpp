// load_shard reads one rank's experts from a checkpoint and cuts its channels: the result equals
// slicing the whole loaded layer (bit for bit), an expert-parallel rank reads only its experts'
// tensors, and a ShardedMoE built from loaded shards gives the unsharded layer's output.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "format/format_case.hpp"
#include "qmoe/checkpoint.hpp"
#include "qmoe/distributed.hpp"

namespace qmoe {
namespace {

bool same_bytes(const Buffer& a, const Buffer& b) {
  if (a.empty() || b.empty()) return a.empty() == b.empty();
  return a.dtype() == b.dtype() && a.nbytes() == b.nbytes() &&
         std::memcmp(a.data(), b.data(), static_cast<size_t>(a.nbytes())) == 0;
}

void expect_same(const QuantizedWeight& a, const QuantizedWeight& b, const char* what) {
  SCOPED_TRACE(what);
  EXPECT_EQ(a.scheme, b.scheme);
  EXPECT_EQ(a.E, b.E);
  EXPECT_EQ(a.N, b.N);
  EXPECT_EQ(a.K, b.K);
  EXPECT_EQ(a.K_full, b.K_full);
  EXPECT_TRUE(same_bytes(a.codes, b.codes));
  EXPECT_TRUE(same_bytes(a.scales, b.scales));
  EXPECT_TRUE(same_bytes(a.zeros, b.zeros));
  EXPECT_TRUE(same_bytes(a.g_idx, b.g_idx));
  EXPECT_TRUE(same_bytes(a.bias, b.bias));
}

struct Written {
  MoEConfig config;
  WriteOptions options;
  QuantScheme scheme;
};

void PrintTo(const Written& w, std::ostream* os) { *os << name(w.options.format); }

class LoadShard : public testing::TestWithParam<Written> {};

TEST_P(LoadShard, EqualsTheSlicedLayerAndReadsOnlyTheRanksExperts) {
  const Written& w = GetParam();
  test::ScratchDir dir("load_shard");
  std::vector<QuantizedExperts> layers;
  layers.push_back(test::random_experts(w.config.num_experts, w.config.hidden,
                                        w.config.intermediate, w.scheme, w.config.w13_bias, 11,
                                        true, DType::bf16));
  write_checkpoint(dir.path(), w.config, layers, w.options);
  const Checkpoint ckpt = Checkpoint::open(dir.path());
  const QuantizedExperts whole = ckpt.load_layer(0);
  const MoEConfig config = ckpt.layer_config(0);
  const bool fused = ckpt.naming() == ExpertNaming::gpt_oss;
  for (const ShardSpec spec : {ShardSpec{.tp_size = 2}, ShardSpec{.ep_size = 2},
                               ShardSpec{.tp_size = 2, .ep_size = 2}, ShardSpec{.ep_size = 3}}) {
    const ShardPlan plan = plan_shards(describe(whole, config), spec);
    SCOPED_TRACE(fmt::format("tp {} ep {}", spec.tp_size, spec.ep_size));
    int64_t read = 0;
    for (int rank = 0; rank < plan.world_size(); ++rank) {
      const QuantizedExperts mine = load_shard(ckpt, 0, plan, rank);
      const QuantizedExperts want = shard_experts(whole, plan, rank);
      expect_same(mine.w13(), want.w13(), "w13");
      expect_same(mine.w2(), want.w2(), "w2");
      const RankShard& r = plan.ranks[size_t(rank)];
      const int64_t bytes = ckpt.experts_bytes(0, r.first_expert, r.num_experts);
      if (r.tp_rank == 0) read += bytes;
      // Per-expert formats: a rank's experts' share of the layer's bytes, no more.
      if (!fused) {
        EXPECT_EQ(bytes * config.num_experts, ckpt.layer_bytes(0) * r.num_experts);
      }
    }
    if (!fused) {
      EXPECT_EQ(read, ckpt.layer_bytes(0));  // the EP ranks read each byte once
    }
  }
}

MoEConfig six_experts(bool bias, Activation activation) {
  MoEConfig c;
  c.num_experts = 6;
  c.hidden = 64;
  c.intermediate = 64;
  c.routing.top_k = 2;
  c.activation = activation;
  c.w13_bias = c.w2_bias = bias;
  return c;
}

INSTANTIATE_TEST_SUITE_P(
    Formats, LoadShard,
    testing::Values(
        Written{six_experts(false, Activation::silu), {}, QuantScheme{.group_size = 32}},
        Written{six_experts(true, Activation::swigluoai),
                {.format = CheckpointFormat::mxfp4,
                 .naming = ExpertNaming::gpt_oss,
                 .scale_dtype = DType::bf16},
                QuantScheme{.kind = WeightKind::mxfp4, .bits = 4, .group_size = 32}}),
    [](const testing::TestParamInfo<Written>& p) {
      return p.param.options.format == CheckpointFormat::mxfp4 ? std::string("gpt_oss_mxfp4")
                                                               : std::string("gptq");
    });

// Ranks built from loaded shards (ShardedMoE::of_rank) sum to the unsharded layer.
TEST(LoadShard, RanksFromLoadedShardsGiveTheLayersOutput) {
  test::ScratchDir dir("load_shard_run");
  const MoEConfig config = six_experts(false, Activation::silu);
  std::vector<QuantizedExperts> layers;
  layers.push_back(test::random_experts(6, 64, 64, QuantScheme{.group_size = 32}, false, 5));
  write_checkpoint(dir.path(), config, layers, {});
  const Checkpoint ckpt = Checkpoint::open(dir.path());
  std::mt19937_64 rng(7);
  Buffer hidden(DType::f32, {5, 64}), logits(DType::f32, {5, 6});
  test::fill_normal(hidden, rng);
  test::fill_normal(logits, rng);
  const MoE whole(ckpt.layer_config(0), ckpt.load_layer(0), "cpu");
  Buffer want(DType::f32, {5, 64});
  whole.forward(hidden.view(), logits.view(), want.view());

  const ShardPlan plan = plan_shards(describe(ckpt.load_layer(0), ckpt.layer_config(0)),
                                     ShardSpec{.tp_size = 2, .ep_size = 2});
  const auto comms = local_communicators(plan.world_size());
  std::vector<ShardedMoE> ranks;
  for (int r = 0; r < plan.world_size(); ++r)
    ranks.push_back(ShardedMoE::of_rank(ckpt.layer_config(0), load_shard(ckpt, 0, plan, r), plan,
                                        *comms[size_t(r)], "cpu"));
  std::vector<Buffer> outs;
  for (int r = 0; r < plan.world_size(); ++r)
    outs.emplace_back(DType::f32, std::initializer_list<int64_t>{5, 64});
  std::vector<std::thread> threads;
  for (int r = 0; r < plan.world_size(); ++r)
    threads.emplace_back(
        [&, r] { ranks[size_t(r)].forward(hidden.view(), logits.view(), outs[size_t(r)].view()); });
  for (std::thread& t : threads) t.join();
  for (int r = 0; r < plan.world_size(); ++r)
    EXPECT_LT(test::relative_error(outs[size_t(r)], want.clone()), 1e-5) << "rank " << r;
}

}  // namespace
}  // namespace qmoe
