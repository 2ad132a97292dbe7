// Upstream bugs (the vLLM WNA16 MoE spec, section 8) that concern the forward's numbers, as named
// cases, against the independent float64 reference. Bounds as in emulation_test.cpp: f32
// accumulation, normalized error below 1e-5.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "backend/backend.hpp"
#include "qmoe/error.hpp"
#include "qmoe/moe.hpp"
#include "support/moe_case.hpp"

namespace qmoe {
namespace {

double error_of(const test::MoECase& c, const std::string& backend) {
  MoE moe(c.config, *c.experts, backend);
  Buffer out(c.hidden.dtype(), {c.hidden.dim(0), c.config.hidden});
  moe.forward_routed(c.hidden.view(), c.topk_weights.view(), c.topk_ids.view(), out.view());
  return test::relative_error(out, c.reference);
}

double emulation_error(const test::CaseSpec& spec) {
  return error_of(test::make_case(spec), "emulation");
}

// The CPU backends of this build (the cpu backend needs x86-64).
std::vector<std::string> host_backends() {
  std::vector<std::string> names{"emulation"};
  if (find_backend("cpu") && host_cpu().has(CpuFeature::x86_64)) names.emplace_back("cpu");
  return names;
}

// #2: the int8 quant config once used w1's bias for w2. Distinct random b13 and b2 per expert,
// both large enough that swapping them (or dropping one) moves the output far past the bound.
TEST(UpstreamRegression, Int8LayerUsesW2BiasForW2) {
  const test::MoECase c = test::make_case({.E = 4,
                                           .H = 64,
                                           .I = 48,
                                           .M = 5,
                                           .top_k = 2,
                                           .scheme = QuantScheme{.bits = 8, .group_size = 16},
                                           .bias = true});
  for (const std::string& backend : host_backends())
    EXPECT_LT(error_of(c, backend), 1e-5) << backend;
}

// #20: a kernel added the bias before dequantization, i.e. scaled it by the group scale. With
// scales far from 1 (here all below 0.5) that bias is off by the scale, so every backend must
// add it after dequantizing.
TEST(UpstreamRegression, BiasIsAddedAfterDequantizationWithNonUnitScales) {
  test::MoECase c = test::make_case({.E = 3,
                                     .H = 64,
                                     .I = 64,
                                     .M = 6,
                                     .top_k = 2,
                                     .scheme = test::scheme(4, 16, true),
                                     .bias = true});
  for (const QuantizedWeight* w : {&c.experts->w13(), &c.experts->w2()}) {
    const auto scales = w->scales.span<float>();
    ASSERT_LT(*std::max_element(scales.begin(), scales.end()), 0.5f);
  }
  for (const std::string& backend : host_backends())
    EXPECT_LT(error_of(c, backend), 1e-5) << backend;
}

// #12: emulation baked zero points in and an assert on zeros crashed for asymmetric input.
TEST(UpstreamRegression, EmulationPreparesAsymmetricWeights) {
  EXPECT_LT(
      emulation_error(
          {.E = 3,
           .H = 64,
           .I = 64,
           .M = 4,
           .top_k = 1,
           .scheme = QuantScheme{.bits = 4, .zero_point = ZeroPoint::explicit_, .group_size = 32}}),
      1e-5);
}

// #10: int8 with a group size (not channelwise) was refused upstream.
TEST(UpstreamRegression, Int8WithGroup128Runs) {
  EXPECT_LT(emulation_error({.E = 5,
                             .H = 256,
                             .I = 128,
                             .M = 3,
                             .top_k = 2,
                             .scheme = QuantScheme{.bits = 8, .group_size = 128}}),
            1e-5);
}

// #21: router weights on the input with k > 1 would scale before a non-linearity; refuse it.
TEST(UpstreamRegression, RouterWeightOnInputNeedsTopKOne) {
  EXPECT_THROW(test::make_case({.E = 4,
                                .H = 64,
                                .I = 32,
                                .M = 2,
                                .top_k = 2,
                                .scheme = QuantScheme{.bits = 4, .group_size = 32},
                                .router_weight_on_input = true}),
               Error);
}

// #21, the k = 1 case: weight on the input of a linear-in-x layer equals weight on the output
// when the activation is positively homogeneous of degree 2 (relu^2): act(w x) = w^2 act(x).
TEST(UpstreamRegression, RouterWeightOnInputAppliedOnceNotTwice) {
  test::MoECase c = test::make_case({.E = 4,
                                     .H = 64,
                                     .I = 32,
                                     .M = 6,
                                     .top_k = 1,
                                     .scheme = QuantScheme{.bits = 4, .group_size = 32},
                                     .activation = Activation::relu2_no_mul,
                                     .router_weight_on_input = true});
  MoE on_input(c.config, *c.experts, "emulation");
  MoEConfig output_config = c.config;
  output_config.apply_router_weight_on_input = false;
  MoE on_output(output_config, *c.experts, "emulation");
  Buffer a(DType::f32, {6, 64}), b(DType::f32, {6, 64});
  on_input.forward_routed(c.hidden.view(), c.topk_weights.view(), c.topk_ids.view(), a.view());
  // w x through relu^2 gives w^2 relu^2(W x); on the output side that is weight w^2.
  Buffer squared(DType::f32, {6, 1});
  for (int m = 0; m < 6; ++m) {
    const float w = c.topk_weights.data_as<float>()[m];
    squared.data_as<float>()[m] = w * w;
  }
  on_output.forward_routed(c.hidden.view(), squared.view(), c.topk_ids.view(), b.view());
  EXPECT_LT(test::relative_error(a, b), 1e-5);
}

}  // namespace
}  // namespace qmoe
