// The emulation backend (float accumulation) against the independent float64 reference
// (src/sample/reference_moe.hpp), through the public MoE API. Error sources: f32 accumulation
// over K <= 512 and f32 activations, so the normalized error stays near 1e-6; 1e-5 leaves margin
// without hiding a wrong formula (a missing bias or a wrong group would give errors of order 1e-1).
#include <gtest/gtest.h>

#include "qmoe/error.hpp"
#include "qmoe/moe.hpp"
#include "support/moe_case.hpp"

namespace qmoe {
namespace {

using test::CaseSpec;

using test::Scenario;

QuantScheme int4_g(int group, bool zp = false, bool act_order = false) {
  return test::scheme(4, group, zp, act_order);
}

class EmulationMatchesReference : public testing::TestWithParam<Scenario> {};

TEST_P(EmulationMatchesReference, WithinF32Rounding) {
  const CaseSpec& spec = GetParam().spec;
  test::MoECase c = test::make_case(spec);
  MoE moe(c.config, *c.experts, "emulation");
  Buffer out(spec.act_dtype, {spec.M, spec.H});
  moe.forward(c.hidden.view(), c.router_logits.view(), out.view());
  EXPECT_LT(test::relative_error(out, c.reference), 1e-5);
}

INSTANTIATE_TEST_SUITE_P(
    Schemes, EmulationMatchesReference,
    testing::Values(Scenario{"int4_g128_sym", {.E = 8, .H = 256, .I = 128, .M = 5, .top_k = 2}},
                    Scenario{"int4_g32_asym_bias",
                             {.E = 6,
                              .H = 96,
                              .I = 64,
                              .M = 7,
                              .top_k = 3,
                              .scheme = int4_g(32, true),
                              .bias = true}},
                    Scenario{"int8_channelwise",
                             {.E = 5,
                              .H = 80,
                              .I = 48,
                              .M = 3,
                              .top_k = 2,
                              .scheme = QuantScheme{.bits = 8, .group_size = kChannelwise}}},
                    Scenario{"int4_act_order_gelu",
                             {.E = 7,
                              .H = 128,
                              .I = 64,
                              .M = 9,
                              .top_k = 4,
                              .scheme = int4_g(32, false, true),
                              .activation = Activation::gelu}},
                    Scenario{"relu2_no_mul_top1_on_input",
                             {.E = 3,
                              .H = 64,
                              .I = 32,
                              .M = 4,
                              .top_k = 1,
                              .scheme = int4_g(32),
                              .activation = Activation::relu2_no_mul,
                              .router_weight_on_input = true}},
                    Scenario{"mxfp4_swigluoai",
                             {.E = 4,
                              .H = 64,
                              .I = 64,
                              .M = 6,
                              .top_k = 2,
                              .scheme = QuantScheme{.kind = WeightKind::mxfp4, .group_size = 32},
                              .activation = Activation::swigluoai}}),
    [](const testing::TestParamInfo<Scenario>& p) { return std::string(p.param.name); });

TEST(Emulation, RejectsCudaDevice) {
  test::MoECase c = test::make_case({});
  EXPECT_THROW(MoE(c.config, *c.experts, "emulation", Device{DeviceKind::cuda, 0}), Error);
}

}  // namespace
}  // namespace qmoe
