// canonical -> format -> canonical must be bit-identical for every scheme each format can hold.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <vector>

#include "format_case.hpp"
#include "qmoe/checkpoint.hpp"
#include "support/expect_error.hpp"

namespace qmoe {
namespace {

using test::random_experts;

struct RoundTrip {
  CheckpointFormat format;
  QuantScheme scheme;
  int64_t H = 64, I = 32;
  bool bias = false;
  int gptq_version = 1;
  ExpertNaming naming = ExpertNaming::qwen;
  DType scale_dtype = DType::f16;
  int64_t max_shard_bytes = 0;
  Activation activation = Activation::silu;
  std::string model_type = "qwen2_moe";
  CheckpointFormat stored_as = CheckpointFormat::gptq;  // what moe_wna16 reads: gptq or awq
};

QuantScheme scheme(int bits, int group, bool asym, bool act_order = false) {
  QuantScheme s;
  s.bits = bits;
  s.group_size = group;
  s.zero_point = asym ? ZeroPoint::explicit_ : ZeroPoint::none;
  s.act_order = act_order;
  return s;
}

std::string describe(const RoundTrip& c) {
  return fmt::format("{} {} H={} I={}{} v{} {}", name(c.format), to_string(c.scheme), c.H, c.I,
                     c.bias ? " bias" : "", c.gptq_version, name(c.activation));
}

void check_round_trip(const RoundTrip& c) {
  SCOPED_TRACE(describe(c));
  MoEConfig config;
  config.num_experts = 3;
  config.hidden = c.H;
  config.intermediate = c.I;
  config.routing.top_k = 2;
  config.activation = c.activation;
  const bool gated = is_gated(c.activation);
  std::vector<QuantizedExperts> layers;
  layers.push_back(random_experts(3, c.H, c.I, c.scheme, c.bias, 11, gated, c.scale_dtype));
  layers.push_back(random_experts(3, c.H, c.I, c.scheme, c.bias, 12, gated, c.scale_dtype));

  test::ScratchDir dir("roundtrip");
  WriteOptions options;
  options.format = c.format == CheckpointFormat::moe_wna16 ? c.stored_as : c.format;
  options.gptq_version = c.gptq_version;
  options.naming = c.naming;
  options.scale_dtype = c.scale_dtype;
  options.max_shard_bytes = c.max_shard_bytes;
  options.model_type = c.model_type;
  write_checkpoint(dir.path(), config, layers, options);
  EXPECT_EQ(std::filesystem::exists(dir.path() / "model.safetensors.index.json"),
            c.max_shard_bytes > 0);

  const Checkpoint ckpt =
      Checkpoint::open(dir.path(), {.as_moe_wna16 = c.format == CheckpointFormat::moe_wna16});
  EXPECT_EQ(ckpt.format_kind(), c.format);
  EXPECT_EQ(ckpt.moe_layers(), (std::vector<int>{0, 1}));
  EXPECT_EQ(ckpt.naming(), c.naming);
  EXPECT_EQ(ckpt.moe_config().num_experts, 3);
  EXPECT_EQ(ckpt.moe_config().hidden, c.H);
  EXPECT_EQ(ckpt.moe_config().intermediate, c.I);
  EXPECT_EQ(ckpt.moe_config().activation, c.activation);
  EXPECT_EQ(ckpt.moe_config().w13_bias, c.bias);
  QuantScheme expected = c.scheme;
  const bool e8m0 = c.format == CheckpointFormat::mxfp4 || c.format == CheckpointFormat::quark;
  expected.source_scale_dtype = e8m0 ? DType::u8 : c.scale_dtype;
  EXPECT_EQ(ckpt.scheme(), expected) << to_string(ckpt.scheme());
  for (int layer : {0, 1}) test::expect_identical(ckpt.load_layer(layer), layers[layer]);
}

TEST(RoundTrip, Gptq) {
  for (int bits : {4, 8}) {
    for (bool asym : {false, true}) {
      for (int version : {1, 2}) {
        check_round_trip({.format = CheckpointFormat::gptq,
                          .scheme = scheme(bits, 16, asym),
                          .gptq_version = version});
        check_round_trip({.format = CheckpointFormat::gptq,
                          .scheme = scheme(bits, kChannelwise, asym),
                          .gptq_version = version});
        check_round_trip({.format = CheckpointFormat::gptq,
                          .scheme = scheme(bits, 16, asym, true),
                          .gptq_version = version});
      }
    }
  }
}

TEST(RoundTrip, GptqWithBiasMixtralNamingAndShards) {
  check_round_trip({.format = CheckpointFormat::gptq,
                    .scheme = scheme(4, 32, true),
                    .bias = true,
                    .naming = ExpertNaming::mixtral,
                    .max_shard_bytes = 4096});
  check_round_trip({.format = CheckpointFormat::gptq,
                    .scheme = scheme(8, 16, false),
                    .scale_dtype = DType::f32});
  check_round_trip({.format = CheckpointFormat::gptq,
                    .scheme = scheme(4, 16, false),
                    .scale_dtype = DType::bf16});
}

TEST(RoundTrip, GptqNonGatedActivation) {
  check_round_trip({.format = CheckpointFormat::gptq,
                    .scheme = scheme(4, 16, false),
                    .activation = Activation::relu2_no_mul});
}

TEST(RoundTrip, Awq) {
  check_round_trip({.format = CheckpointFormat::awq, .scheme = scheme(4, 16, true)});
  check_round_trip({.format = CheckpointFormat::awq, .scheme = scheme(4, kChannelwise, true)});
  check_round_trip({.format = CheckpointFormat::awq,
                    .scheme = scheme(4, 32, true),
                    .bias = true,
                    .naming = ExpertNaming::mixtral});
  check_round_trip({.format = CheckpointFormat::awq, .scheme = scheme(4, 16, false)});
}

TEST(RoundTrip, CompressedTensors) {
  for (int bits : {4, 8}) {
    for (bool asym : {false, true}) {
      check_round_trip(
          {.format = CheckpointFormat::compressed_tensors, .scheme = scheme(bits, 16, asym)});
      check_round_trip({.format = CheckpointFormat::compressed_tensors,
                        .scheme = scheme(bits, kChannelwise, asym)});
      check_round_trip(
          {.format = CheckpointFormat::compressed_tensors, .scheme = scheme(bits, 16, asym, true)});
    }
  }
}

// N and K not multiples of the 8 (int4) or 4 (int8) values per int32: compressed-tensors pads the
// last word of each weight row and the last word-row of the zero points.
TEST(RoundTrip, CompressedTensorsPartialWords) {
  for (int bits : {4, 8}) {
    check_round_trip({.format = CheckpointFormat::compressed_tensors,
                      .scheme = scheme(bits, 2, true),
                      .H = 42,
                      .I = 10});
    check_round_trip({.format = CheckpointFormat::compressed_tensors,
                      .scheme = scheme(bits, 4, true),
                      .H = 44,
                      .I = 12,
                      .bias = true});
  }
}

TEST(RoundTrip, MoeWna16ReadsGptqIncludingGroupedInt8AndAwq) {
  check_round_trip({.format = CheckpointFormat::moe_wna16, .scheme = scheme(8, 16, false)});
  check_round_trip({.format = CheckpointFormat::moe_wna16, .scheme = scheme(8, 32, true)});
  check_round_trip(
      {.format = CheckpointFormat::moe_wna16, .scheme = scheme(4, 16, true), .gptq_version = 2});
  check_round_trip({.format = CheckpointFormat::moe_wna16,
                    .scheme = scheme(4, 32, true),
                    .stored_as = CheckpointFormat::awq});
}

// Scales are stored in f16 by default; a value f16 cannot hold must fail loudly, not round.
TEST(RoundTrip, WriterRefusesScalesTheStorageDtypeWouldRound) {
  MoEConfig config;
  config.num_experts = 3;
  config.hidden = 64;
  config.intermediate = 32;
  std::vector<QuantizedExperts> layers;
  layers.push_back(random_experts(3, 64, 32, scheme(4, 16, false), false, 5, true, DType::f32));
  test::ScratchDir dir("rounding");
  test::expect_error([&] { write_checkpoint(dir.path(), config, layers, WriteOptions{}); },
                     "is not exactly representable in F16 (write with F32)");
}

// gpt-oss: fused [E, 2I, H/32, 16] blocks with interleaved gate/up rows, e8m0 scales, biases.
TEST(RoundTrip, Mxfp4GptOss) {
  const QuantScheme mx{.kind = WeightKind::mxfp4, .bits = 4, .group_size = 32};
  for (bool bias : {false, true}) {
    check_round_trip({.format = CheckpointFormat::mxfp4,
                      .scheme = mx,
                      .bias = bias,
                      .naming = ExpertNaming::gpt_oss,
                      .scale_dtype = DType::bf16,
                      .activation = Activation::swigluoai_uninterleave,
                      .model_type = "gpt_oss"});
  }
}

// AMD Quark: per-expert U8 codes and e8m0 scales, weight-only and W4A4 (floor and even activation
// scales), with and without bias.
TEST(RoundTrip, QuarkMxfp4) {
  for (ActivationQuant activations :
       {ActivationQuant::none, ActivationQuant::mxfp4, ActivationQuant::mxfp4_even}) {
    for (bool bias : {false, true}) {
      QuantScheme mx{.kind = WeightKind::mxfp4, .bits = 4, .group_size = 32};
      mx.activation_quant = activations;
      check_round_trip({.format = CheckpointFormat::quark,
                        .scheme = mx,
                        .H = 96,
                        .I = 64,
                        .bias = bias,
                        .scale_dtype = DType::bf16});
    }
  }
}

}  // namespace
}  // namespace qmoe
