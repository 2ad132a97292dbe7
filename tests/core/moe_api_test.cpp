// The public MoE object: inputs that do not fit the layer are refused with a message that says
// which tensor, what was expected and what was given.
#include <gtest/gtest.h>

#include <algorithm>
#include <iterator>
#include <string>

#include "backend/backend.hpp"
#include "qmoe/error.hpp"
#include "qmoe/moe.hpp"
#include "route/topk.hpp"
#include "support/expect_error.hpp"
#include "support/moe_case.hpp"

namespace qmoe {
namespace {

using test::expect_error;

class MoEApi : public testing::Test {
 protected:
  test::MoECase c = test::make_case({.E = 6,
                                     .H = 64,
                                     .I = 32,
                                     .M = 3,
                                     .top_k = 2,
                                     .scheme = QuantScheme{.bits = 4, .group_size = 32}});
  MoE moe{c.config, *c.experts, "emulation"};
};

TEST_F(MoEApi, RefusesWrongShapesDtypesAndDevices) {
  Buffer out(DType::f32, {3, 64});
  Buffer short_out(DType::f32, {3, 63});
  expect_error([&] { moe.forward(c.hidden.view(), c.router_logits.view(), short_out.view()); },
               "out must be [3, 64], got f32[3, 63] (cpu)");
  Buffer bf16_out(DType::bf16, {3, 64});
  expect_error([&] { moe.forward(c.hidden.view(), c.router_logits.view(), bf16_out.view()); },
               "out must have the dtype of hidden (f32), got bf16");
  Buffer logits(DType::f32, {3, 5});
  expect_error([&] { moe.forward(c.hidden.view(), logits.view(), out.view()); },
               "router_logits must be [3, 6]");
  Buffer int_hidden(DType::i32, {3, 64});
  expect_error([&] { moe.forward(int_hidden.view(), c.router_logits.view(), out.view()); },
               "hidden must be f32, f16 or bf16, got i32");
  TensorView on_gpu(c.hidden.data(), DType::f32, {3, 64}, Device{DeviceKind::cuda, 0});
  expect_error([&] { moe.forward(on_gpu, c.router_logits.view(), out.view()); },
               "hidden is on cuda:0 but the MoE runs on cpu");
  Buffer ids(DType::i32, {3, 2});
  const int32_t bad_ids[] = {0, 1, 2, 6, 3, 4};
  std::copy(std::begin(bad_ids), std::end(bad_ids), ids.data_as<int32_t>());
  expect_error(
      [&] { moe.forward_routed(c.hidden.view(), c.topk_weights.view(), ids.view(), out.view()); },
      "topk_ids[1, 1] = 6 is not an expert id (valid: 0..5)");
}

TEST_F(MoEApi, RefusesExpertsThatDisagreeWithTheConfig) {
  MoEConfig wrong = c.config;
  wrong.intermediate = 16;
  expect_error([&] { MoE(wrong, *c.experts, "emulation"); }, "experts are [E=6, H=64, I=32]");
  wrong = c.config;
  wrong.activation = Activation::silu_no_mul;
  expect_error([&] { MoE(wrong, *c.experts, "emulation"); }, "activation silu_no_mul is not gated");
  wrong = c.config;
  wrong.w2_bias = true;
  expect_error([&] { MoE(wrong, *c.experts, "emulation"); }, "bias flags");
  expect_error([&] { MoE(c.config, *c.experts, "no-such-backend"); },
               "unknown backend 'no-such-backend' (known: ");
}

// Each backend's own prepare refuses them too (the backend API, which MoE and the oracle property
// test call): backends size and order w13's rows by the config or by the weights, and a gated
// activation over w13 of I rows would read past the weights. CUDA backends refuse before any
// CUDA call, so all run without a GPU.
TEST_F(MoEApi, EveryBackendsPrepareRefusesThem) {
  MoEConfig not_gated = c.config;
  not_gated.activation = Activation::silu_no_mul;
  for (const Backend* backend : built_backends()) {
    const bool cuda = backend->name().starts_with("cuda");
    const Device device{cuda ? DeviceKind::cuda : DeviceKind::cpu, 0};
    SCOPED_TRACE(std::string(backend->name()));
    expect_error([&] { backend->prepare(*c.experts, not_gated, device); },
                 "activation silu_no_mul is not gated but w13 has 64 rows for I = 32");
    expect_error([&] { backend->prepare_owned(c.experts->clone(), not_gated, device); },
                 "activation silu_no_mul is not gated");
  }
}

// Given the routing the CPU router computes (the test case's own comes from the float64 reference
// router and may differ in the last bit), both entry points give the same bits.
TEST_F(MoEApi, RoutedAndUnroutedForwardsAgree) {
  Buffer a(DType::f32, {3, 64}), b(DType::f32, {3, 64});
  Buffer weights(DType::f32, {3, 2}), ids(DType::i32, {3, 2});
  route_topk(c.config.routing, c.router_logits.data_as<float>(), 3, 6, weights.data_as<float>(),
             ids.data_as<int32_t>());
  moe.forward(c.hidden.view(), c.router_logits.view(), a.view());
  moe.forward_routed(c.hidden.view(), weights.view(), ids.view(), b.view());
  EXPECT_EQ(test::relative_error(a, b.clone()), 0.0);
}

}  // namespace
}  // namespace qmoe
