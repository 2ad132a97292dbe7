// load_shard reads one rank's part of a checkpoint layer straight from the files: the rank's
// experts and, of those, the rows or runs of columns that hold its channels. The truth is the
// independent path: the whole layer read, then cut in memory (shard_experts), bit for bit. The
// bytes it reads are measured (Checkpoint::bytes_read) and must equal what shard_bytes computes,
// and over a TP group add up to the group's experts once plus the tensors every TP rank needs
// whole (named in `replicated`).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "format/format_case.hpp"
#include "format/safetensors.hpp"
#include "qmoe/checkpoint.hpp"
#include "qmoe/distributed.hpp"
#include "support/expect_error.hpp"

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

const std::vector<ShardSpec> kPlans{ShardSpec{.tp_size = 2}, ShardSpec{.tp_size = 4},
                                    ShardSpec{.ep_size = 2}, ShardSpec{.tp_size = 2, .ep_size = 2},
                                    ShardSpec{.tp_size = 4, .ep_size = 2}};

struct Written {
  std::string label;
  MoEConfig config;
  WriteOptions options;
  QuantScheme scheme;
  OpenOptions open = {};
  std::vector<ShardSpec> plans = kPlans;
};

void PrintTo(const Written& w, std::ostream* os) { *os << w.label; }

// Whether every rank of a TP group reads this stored tensor whole: it has no dimension over the
// intermediate channels. w13 (gate/up, w1/w3) is cut on N, so its tensors over K = H only are
// (GPTQ's g_idx, compressed-tensors' weight_g_idx and weight_shape); w2 (down_proj, w2) is cut on
// K, so its tensors over N = H only are: the weight_shape, and the scales and zero points when
// they do not run along K (act-order keeps the whole-K table, channelwise has one group). w2's
// bias is read by tp_rank 0 alone, so it is not. gpt-oss and Quark's MXFP4 have none.
bool replicated(const std::string& name, const QuantScheme& s) {
  const auto ends = [&](std::string_view suffix) { return name.ends_with(suffix); };
  const bool down =
      name.find(".down_proj.") != std::string::npos || name.find(".w2.") != std::string::npos;
  if (ends(".weight_shape")) return true;
  if (!down) return ends(".g_idx") || ends(".weight_g_idx");
  const bool groups_whole = s.act_order || s.group_size == kChannelwise;
  return groups_whole && (ends(".scales") || ends(".qzeros") || ends(".weight_scale") ||
                          ends(".weight_zero_point"));
}

bool is_w2_bias(const std::string& name) {
  return name.ends_with(".down_proj.bias") || name.ends_with(".w2.bias") ||
         name.ends_with(".down_proj_bias");
}

// The stored bytes of experts [first, first + count) of layer 0: their modules' tensors, or their
// share of every fused [E, ...] tensor; of those the bytes `replicated` names, and w2's bias.
struct ExpertBytes {
  int64_t all = 0, replicated = 0, w2_bias = 0;
};

ExpertBytes stored_bytes(const format::TensorStore& store, const Checkpoint& ckpt, int64_t first,
                         int64_t count) {
  ExpertBytes b;
  const int64_t E = ckpt.moe_config().num_experts;
  for (const auto& [name, t] : store.tensors()) {
    if (!name.starts_with("model.layers.0.")) continue;
    const auto size = static_cast<int64_t>(t.bytes.size());
    if (ckpt.naming() == ExpertNaming::gpt_oss) {
      if (name.find(".experts.") == std::string::npos) continue;
      b.all += size / E * count;
      if (is_w2_bias(name)) b.w2_bias += size / E * count;
      continue;
    }
    for (int64_t e = first; e < first + count; ++e) {
      if (name.find(fmt::format(".experts.{}.", e)) == std::string::npos) continue;
      b.all += size;
      if (replicated(name, ckpt.scheme())) b.replicated += size;
      if (is_w2_bias(name)) b.w2_bias += size;
    }
  }
  return b;
}

class LoadShard : public testing::TestWithParam<Written> {};

TEST_P(LoadShard, ReadsOnlyTheRanksBytesAndEqualsTheSlicedLayer) {
  const Written& w = GetParam();
  test::ScratchDir dir("load_shard");
  std::vector<QuantizedExperts> layers;
  layers.push_back(test::random_experts(w.config.num_experts, w.config.hidden,
                                        w.config.intermediate, w.scheme, w.config.w13_bias, 11,
                                        is_gated(w.config.activation), w.options.scale_dtype));
  write_checkpoint(dir.path(), w.config, layers, w.options);
  const Checkpoint ckpt = Checkpoint::open(dir.path(), w.open);
  const format::TensorStore store = format::TensorStore::open(dir.path());
  const QuantizedExperts whole = ckpt.load_layer(0);
  const MoEConfig config = ckpt.layer_config(0);
  for (const ShardSpec spec : w.plans) {
    const ShardPlan plan = plan_shards(describe(whole, config), spec);
    SCOPED_TRACE(fmt::format("tp {} ep {}", spec.tp_size, spec.ep_size));
    std::vector<int64_t> group_read(size_t(spec.ep_size), 0);
    for (int rank = 0; rank < plan.world_size(); ++rank) {
      SCOPED_TRACE(fmt::format("rank {}", rank));
      const int64_t before = ckpt.bytes_read();
      const QuantizedExperts mine = load_shard(ckpt, 0, plan, rank);
      const int64_t read = ckpt.bytes_read() - before;
      const QuantizedExperts want = shard_experts(whole, plan, rank);
      expect_same(mine.w13(), want.w13(), "w13");
      expect_same(mine.w2(), want.w2(), "w2");
      // Measured against computed.
      EXPECT_EQ(read, shard_bytes(ckpt, 0, plan, rank));
      const RankShard& r = plan.ranks[size_t(rank)];
      group_read[size_t(r.ep_rank)] += read;
      // About 1/tp of its experts' bytes: the tensors every TP rank reads whole are small, and
      // w2's bias is tp_rank 0's alone.
      const ExpertBytes own = stored_bytes(store, ckpt, r.first_expert, r.num_experts);
      const int64_t bias = r.tp_rank == 0 ? own.w2_bias : 0;
      EXPECT_LE(read, (own.all - own.w2_bias) / spec.tp_size + own.replicated + bias);
      EXPECT_LT(static_cast<double>(read - bias),
                1.3 * static_cast<double>(own.all) / spec.tp_size);
    }
    int64_t layer_read = 0;
    for (int ep = 0; ep < spec.ep_size; ++ep) {
      const RankShard& r = plan.ranks[size_t(ep * spec.tp_size)];
      const ExpertBytes group = stored_bytes(store, ckpt, r.first_expert, r.num_experts);
      // A TP group reads its experts once, plus tp - 1 more copies of the replicated tensors. (A
      // per-expert checkpoint of interleaved swigluoai puts a rank's pairs of rows in its gate
      // module or its up module, so fewer ranks read each of those modules' K-only tensors.)
      const int64_t replicas = group.all + (spec.tp_size - 1) * group.replicated;
      if (config.activation == Activation::swigluoai && ckpt.naming() != ExpertNaming::gpt_oss) {
        EXPECT_GE(group_read[size_t(ep)], group.all);
        EXPECT_LE(group_read[size_t(ep)], replicas);
      } else {
        EXPECT_EQ(group_read[size_t(ep)], replicas) << "EP group " << ep;
      }
      layer_read += group_read[size_t(ep)];
    }
    if (spec.tp_size == 1) {
      EXPECT_EQ(layer_read, ckpt.layer_bytes(0));  // the EP ranks read each byte once
    }
  }
}

MoEConfig five_experts(bool bias, Activation activation = Activation::silu) {
  MoEConfig c;
  c.num_experts = 5;  // odd: EP 2 splits it 3 + 2
  c.hidden = 64;
  c.intermediate = 128;  // TP 4: 32 channels a rank, whole groups of 32 and whole int32 words
  c.routing.top_k = 2;
  c.activation = activation;
  c.w13_bias = c.w2_bias = bias;
  return c;
}

QuantScheme int_scheme(int bits, int group, bool asym, bool act_order = false) {
  return QuantScheme{.bits = bits,
                     .zero_point = asym ? ZeroPoint::explicit_ : ZeroPoint::none,
                     .group_size = group,
                     .act_order = act_order};
}

WriteOptions as(CheckpointFormat format, int gptq_version = 1,
                ExpertNaming naming = ExpertNaming::qwen) {
  return WriteOptions{.format = format, .naming = naming, .gptq_version = gptq_version};
}

const QuantScheme kMxfp4{.kind = WeightKind::mxfp4, .bits = 4, .group_size = 32};

std::vector<Written> written_cases() {
  using F = CheckpointFormat;
  WriteOptions gpt_oss{.format = F::mxfp4,
                       .naming = ExpertNaming::gpt_oss,
                       .scale_dtype = DType::bf16,
                       .model_type = "gpt_oss"};
  // TP 3 of I = 192: rank 1's pairs of rows [128, 256) of [gate; up] start in the gate module and
  // end in the up module.
  MoEConfig interleaved = five_experts(false, Activation::swigluoai);
  interleaved.intermediate = 192;
  QuantScheme w4a4 = kMxfp4;
  w4a4.activation_quant = ActivationQuant::mxfp4;
  return {
      {"gptq_int4_g32_sym", five_experts(false), as(F::gptq), int_scheme(4, 32, false)},
      {"gptq_v2_int4_g32_asym_bias", five_experts(true), as(F::gptq, 2, ExpertNaming::mixtral),
       int_scheme(4, 32, true)},
      {"gptq_int8_g32_asym_act_order", five_experts(false), as(F::gptq),
       int_scheme(8, 32, true, true)},
      {"gptq_int4_g32_act_order_bias", five_experts(true), as(F::gptq, 2),
       int_scheme(4, 32, false, true)},
      {"gptq_int4_channelwise_asym", five_experts(false), as(F::gptq),
       int_scheme(4, kChannelwise, true)},
      {"gptq_int4_g32_swigluoai_interleaved",
       interleaved,
       as(F::gptq),
       int_scheme(4, 32, false),
       {},
       {ShardSpec{.tp_size = 2}, ShardSpec{.tp_size = 3}, ShardSpec{.tp_size = 3, .ep_size = 2}}},
      {"gptq_int8_g32_not_gated", five_experts(true, Activation::relu2_no_mul), as(F::gptq),
       int_scheme(8, 32, true)},
      {"awq_int4_g32_asym_bias", five_experts(true), as(F::awq), int_scheme(4, 32, true)},
      {"awq_int4_g32_sym", five_experts(false), as(F::awq), int_scheme(4, 32, false)},
      {"ct_int4_g32_asym_act_order", five_experts(false), as(F::compressed_tensors),
       int_scheme(4, 32, true, true)},
      {"ct_int8_channelwise_sym_bias", five_experts(true), as(F::compressed_tensors),
       int_scheme(8, kChannelwise, false)},
      {"ct_int8_g32_asym", five_experts(false), as(F::compressed_tensors), int_scheme(8, 32, true)},
      {"moe_wna16_gptq_int4_g32_asym", five_experts(false), as(F::gptq), int_scheme(4, 32, true),
       OpenOptions{.as_moe_wna16 = true}},
      {"moe_wna16_awq_int4_g32", five_experts(true), as(F::awq), int_scheme(4, 32, true),
       OpenOptions{.as_moe_wna16 = true}},
      {"gpt_oss_mxfp4_bias", five_experts(true), gpt_oss, kMxfp4},
      {"gpt_oss_mxfp4_swigluoai_interleaved", five_experts(true, Activation::swigluoai),
       WriteOptions{
           .format = F::mxfp4, .naming = ExpertNaming::gpt_oss, .scale_dtype = DType::bf16},
       kMxfp4},
      {"quark_mxfp4_bias", five_experts(true), as(F::quark), kMxfp4},
      {"quark_mxfp4_w4a4", five_experts(false), as(F::quark), w4a4},
  };
}

INSTANTIATE_TEST_SUITE_P(Formats, LoadShard, testing::ValuesIn(written_cases()),
                         [](const testing::TestParamInfo<Written>& p) { return p.param.label; });

// A plan for canonical bytes (word_bits 8) may cut a packed 32-bit word of the files; load_shard
// refuses it, naming the TP sizes that read straight from the files. A channel slice that cuts a
// word, given to load_experts directly, is refused naming the tensor's valid multiples.
TEST(LoadShard, RefusesACutThroughAPackedWord) {
  test::ScratchDir dir("load_shard_word");
  const MoEConfig config = five_experts(false);
  const QuantScheme scheme = int_scheme(4, kChannelwise, true);
  std::vector<QuantizedExperts> layers;
  layers.push_back(test::random_experts(5, 64, 128, scheme, false, 3));
  write_checkpoint(dir.path(), config, layers, {});
  const Checkpoint ckpt = Checkpoint::open(dir.path());
  // 128 / 32 = 4 channels a rank: whole bytes of int4 codes, half an int32 word.
  const ShardPlan bytes_plan = plan_shards(describe(ckpt.load_layer(0), ckpt.layer_config(0)),
                                           ShardSpec{.tp_size = 32, .word_bits = 8});
  test::expect_error([&] { load_shard(ckpt, 0, bytes_plan, 1); },
                     "TP sizes that work: 1, 2, 4, 8, 16");
  test::expect_error([&] { shard_bytes(ckpt, 0, bytes_plan, 1); },
                     "TP sizes that work: 1, 2, 4, 8, 16");
  test::expect_error(
      [&] {
        ckpt.load_experts(0, ExpertSlice{.num_experts = 1, .first_channel = 4, .channels = 8});
      },
      "output channels in multiples of 8");
  test::expect_error(
      [&] {
        ckpt.load_experts(0, ExpertSlice{.num_experts = 1, .first_channel = 64, .channels = 128});
      },
      "not a range of this layer's I = 128");
}

// Ranks built from loaded shards (ShardedMoE::of_rank) sum to the unsharded layer.
TEST(LoadShard, RanksFromLoadedShardsGiveTheLayersOutput) {
  test::ScratchDir dir("load_shard_run");
  MoEConfig config = five_experts(false);
  config.num_experts = 6;
  config.intermediate = 64;
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
