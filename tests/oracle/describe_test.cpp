// describe(): everything the oracle judges comes from the weights and the config as they are,
// never guessed (group size from the scheme, bias from the tensors, shapes of the shard).
#include <gtest/gtest.h>

#include "layers.hpp"
#include "support/moe_case.hpp"

namespace qmoe {
namespace {

TEST(Describe, TakesSchemesShapesAndBiasFromTheWeights) {
  const test::MoECase c = test::make_case({.E = 6,
                                           .H = 96,
                                           .I = 64,
                                           .M = 1,
                                           .top_k = 3,
                                           .scheme = test::int_scheme(8, 32, true),
                                           .activation = Activation::gelu,
                                           .bias = true});
  const LayerDesc d = describe(*c.experts, c.config);
  EXPECT_EQ(d.w13_scheme, test::int_scheme(8, 32, true));
  EXPECT_EQ(d.w2_scheme, test::int_scheme(8, 32, true));
  EXPECT_EQ(d.num_experts, 6);
  EXPECT_EQ(d.hidden, 96);
  EXPECT_EQ(d.intermediate, 64);
  EXPECT_EQ(d.top_k, 3);
  EXPECT_EQ(d.activation, Activation::gelu);
  EXPECT_TRUE(d.w13_bias && d.w2_bias);
  EXPECT_FALSE(d.activation_dtype.has_value());  // not known until a forward
  EXPECT_EQ(d.w2_full_k, 0);
  EXPECT_EQ(d.to_string(), "int8 g32 asym, E=6 H=96 I=64 top-3 gelu, bias");
}

TEST(Describe, GroupSizeIsTheSchemesWhateverTheScalesWereStoredIn) {
  MoEConfig config;
  config.num_experts = 8;
  config.hidden = 256;
  config.intermediate = 128;
  for (DType stored : {DType::f16, DType::bf16, DType::f32}) {
    QuantScheme s = test::int_scheme(4, 64);
    s.source_scale_dtype = stored;
    EXPECT_EQ(describe(s, config).w13_scheme.group_size, 64);
    EXPECT_EQ(describe(s, config).w2_scheme.group_size, 64);
  }
}

TEST(Describe, TakesTheActivationFormatFromTheConfig) {
  MoEConfig config;
  config.num_experts = 8;
  config.hidden = 256;
  config.intermediate = 128;
  EXPECT_EQ(describe(test::int_scheme(4, 64), config).activation_format,
            ActivationFormat::standard);
  config.activation_format = ActivationFormat::batched_experts;
  const LayerDesc d = describe(test::int_scheme(4, 64), config);
  EXPECT_EQ(d.activation_format, ActivationFormat::batched_experts);
  EXPECT_EQ(d.to_string(), "int4 g64 sym, E=8 H=256 I=128 top-2 silu, batched_experts format");
}

TEST(Describe, NamesDifferentSchemesPerWeight) {
  LayerDesc d = test::base_layer();
  d.w2_scheme = test::int_scheme(8, kChannelwise);
  d.tp_size = 2;
  EXPECT_EQ(d.to_string(),
            "w13 int4 g128 sym, w2 int8 channelwise sym, E=128 H=2048 I=768 top-8 silu, bf16 "
            "activations, shard of TP 2 x EP 1");
}

}  // namespace
}  // namespace qmoe
