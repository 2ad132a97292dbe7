#include <gtest/gtest.h>

#include <vector>

#include "qmoe/config.hpp"
#include "qmoe/error.hpp"
#include "support/expect_error.hpp"

namespace qmoe {
namespace {

MoEConfig valid() {
  MoEConfig c;
  c.num_experts = 8;
  c.hidden = 64;
  c.intermediate = 32;
  c.routing.top_k = 2;
  return c;
}

void expect_rejected(const MoEConfig& c, const std::string& fragment) {
  test::expect_error([&] { validate(c); }, fragment);
}

TEST(MoEConfig, ValidConfigPasses) { EXPECT_NO_THROW(validate(valid())); }

TEST(MoEConfig, RejectsEachInconsistency) {
  MoEConfig c = valid();
  c.routing.top_k = 9;
  expect_rejected(c, "top-k 9 must be in 1..8");
  c = valid();
  c.routing.n_group = 3;
  c.routing.topk_group = 1;
  expect_rejected(c, "3 groups do not divide 8 experts");
  c = valid();
  c.routing.n_group = 4;
  c.routing.topk_group = 5;
  expect_rejected(c, "topk_group 5 must be in 1..4");
  c = valid();
  c.routing.n_group = 4;
  c.routing.topk_group = 1;
  c.routing.top_k = 3;
  expect_rejected(c, "top-k 3 exceeds the 2 experts");
  c = valid();
  c.routing.correction_bias = {1.0f, 2.0f};
  expect_rejected(c, "correction bias has 2 entries");
  c = valid();
  c.apply_router_weight_on_input = true;
  expect_rejected(c, "router weights on the input need top-k 1");
  c = valid();
  c.routing.topk_group = 2;
  expect_rejected(c, "topk_group 2 set without n_group");
  c = valid();
  c.hidden = 0;
  expect_rejected(c, "must be positive");
}

TEST(Activation, NamesRoundTripAndAliasesParse) {
  const std::vector<Activation> every = {Activation::silu,
                                         Activation::gelu,
                                         Activation::gelu_tanh,
                                         Activation::swigluoai,
                                         Activation::swigluoai_uninterleave,
                                         Activation::silu_no_mul,
                                         Activation::gelu_no_mul,
                                         Activation::gelu_tanh_no_mul,
                                         Activation::relu2_no_mul};
  EXPECT_EQ(all_activations(), every);
  for (Activation a : every) {
    EXPECT_EQ(parse_activation(name(a)), a);
    EXPECT_EQ(is_gated(a), name(a).find("no_mul") == std::string_view::npos);
  }
  EXPECT_EQ(parse_activation("gelu_pytorch_tanh"), Activation::gelu_tanh);
  test::expect_error([] { parse_activation("tanh"); }, "unknown activation 'tanh' (valid: silu");
}

TEST(MoEConfig, W13RowsFollowGating) {
  MoEConfig c = valid();
  EXPECT_EQ(c.w13_rows(), 64);
  c.activation = Activation::relu2_no_mul;
  EXPECT_EQ(c.w13_rows(), 32);
}

}  // namespace
}  // namespace qmoe
