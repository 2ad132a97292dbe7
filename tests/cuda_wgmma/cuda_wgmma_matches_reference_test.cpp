// cuda-wgmma against the independent float64 reference (src/sample/reference_moe.hpp) on fresh
// random data.
//
// Bounds, normalized error ||out - ref|| / ||ref||: the kernel converts each code to the
// activation dtype and multiplies by a 16-bit scale (and adds a 16-bit zero term) in that dtype,
// so every weight is rounded once (relative 2^-9 in bf16, 2^-12 in f16), on top of the
// roundings of GEMM1's output, the bias rows, the activation, GEMM2's output and the final sum.
// Six roundings of about a third of an ulp in rms each land near 4e-3 (bf16) and 5e-4 (f16);
// bounds 1e-2 and 2e-3. A wrong group, zero point, shuffle or expert offset gives errors of order
// 1e-1 and more.
//
// The matrix covers every scheme the descriptor declares (int4/int8, symmetric and zero points,
// groups 64/128/channelwise, bias, bf16/f16, gated and single activations, router weight on the
// input) over M in {1, 7, 64, 300, 600, 1024, 4096, 8192}, with N not a multiple of the 128-row
// tile, experts that get no rows, and experts whose rows end in a remainder (the smaller tiles);
// act-order (int4/int8, with and without zero points, on both weights or on one of them, gated
// halves, swigluoai's interleaved rows and a single activation); MXFP4 (bf16/f16, with and without
// bias, swigluoai and silu, gpt-oss's shape, block scales up to 2^14 apart in a window).
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "backend/backend.hpp"
#include "cuda_mma/on_device.hpp"
#include "cuda_wgmma/sm90.hpp"
#include "qmoe/error.hpp"
#include "qmoe/moe.hpp"
#include "qmoe/oracle.hpp"
#include "support/expect_error.hpp"
#include "support/moe_case.hpp"

namespace qmoe {
namespace {

using test::CaseSpec;
using test::download;
using test::kGpu;
using test::OnDevice;
using test::poisoned_output;
using test::Scenario;
using test::scheme;

double bound_for(DType dtype) { return dtype == DType::bf16 ? 1e-2 : 2e-3; }

class CudaWgmma : public testing::Test {
 protected:
  void SetUp() override { QMOE_REQUIRE_SM90(); }
};

class CudaWgmmaMatchesReference : public CudaWgmma, public testing::WithParamInterface<Scenario> {};

// The case's routed forward on cuda-wgmma against its reference.
void expect_within_bound(test::MoECase& c, DType dtype) {
  const int64_t M = c.hidden.dim(0), H = c.config.hidden;
  c.config.activation_dtype = dtype;
  MoE moe(c.config, *c.experts, "cuda-wgmma", kGpu);
  OnDevice hidden(c.hidden), weights(c.topk_weights), ids(c.topk_ids);
  OnDevice out = poisoned_output(dtype, M, H);
  moe.forward_routed(hidden.view, weights.view, ids.view, out.view);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_LT(test::relative_error(download(out, dtype, M, H), c.reference), bound_for(dtype));
}

TEST_P(CudaWgmmaMatchesReference, WithinDtypeBound) {
  const CaseSpec& spec = GetParam().spec;
  test::MoECase c = test::make_case(spec);
  expect_within_bound(c, spec.act_dtype);
}

constexpr DType bf16 = DType::bf16, f16 = DType::f16;
const QuantScheme kMxfp4{.kind = WeightKind::mxfp4, .bits = 4, .group_size = 32};

const Scenario kScenarios[] = {
    Scenario{"int4_g128_m1_e8_top2",
             {.E = 8,
              .H = 256,
              .I = 384,
              .M = 1,
              .top_k = 2,
              .scheme = scheme(4, 128),
              .act_dtype = bf16}},
    Scenario{"int4_g128_m7_e60_top6_f16",
             {.E = 60,
              .H = 256,
              .I = 128,
              .M = 7,
              .top_k = 6,
              .scheme = scheme(4, 128),
              .act_dtype = f16}},
    Scenario{"int4_g64_m300_e8_top2_n_not_whole_tiles",
             {.E = 8,
              .H = 192,
              .I = 128,
              .M = 300,
              .top_k = 2,
              .scheme = scheme(4, 64),
              .act_dtype = bf16}},
    Scenario{"int4_g128_m1024_e128_top8",
             {.E = 128,
              .H = 256,
              .I = 128,
              .M = 1024,
              .top_k = 8,
              .scheme = scheme(4, 128),
              .act_dtype = bf16}},
    Scenario{"int4_g128_m8192_e8_top2",
             {.E = 8,
              .H = 256,
              .I = 256,
              .M = 8192,
              .top_k = 2,
              .scheme = scheme(4, 128),
              .act_dtype = bf16}},
    Scenario{"int4_g128_asym_m64_e8_top2",
             {.E = 8,
              .H = 256,
              .I = 256,
              .M = 64,
              .top_k = 2,
              .scheme = scheme(4, 128, true),
              .act_dtype = bf16}},
    Scenario{"int4_g64_asym_m4096_e16_top4_f16_gelu",
             {.E = 16,
              .H = 320,
              .I = 192,
              .M = 4096,
              .top_k = 4,
              .scheme = scheme(4, 64, true),
              .activation = Activation::gelu,
              .act_dtype = f16}},
    Scenario{"int4_channelwise_m300_e8_top2_bias",
             {.E = 8,
              .H = 256,
              .I = 128,
              .M = 300,
              .top_k = 2,
              .scheme = scheme(4, kChannelwise),
              .bias = true,
              .act_dtype = bf16}},
    Scenario{"int4_channelwise_asym_m1024_e8_top2_f16",
             {.E = 8,
              .H = 384,
              .I = 192,
              .M = 1024,
              .top_k = 2,
              .scheme = scheme(4, kChannelwise, true),
              .act_dtype = f16}},
    Scenario{"int8_g128_m1_e8_top2",
             {.E = 8,
              .H = 256,
              .I = 256,
              .M = 1,
              .top_k = 2,
              .scheme = scheme(8, 128),
              .act_dtype = bf16}},
    Scenario{"int8_g128_m1024_e8_top2_f16",
             {.E = 8,
              .H = 256,
              .I = 384,
              .M = 1024,
              .top_k = 2,
              .scheme = scheme(8, 128),
              .act_dtype = f16}},
    Scenario{"int8_g64_asym_m300_e60_top6_bias",
             {.E = 60,
              .H = 192,
              .I = 128,
              .M = 300,
              .top_k = 6,
              .scheme = scheme(8, 64, true),
              .bias = true,
              .act_dtype = bf16}},
    Scenario{"int8_channelwise_asym_m8192_e8_top2_f16",
             {.E = 8,
              .H = 128,
              .I = 128,
              .M = 8192,
              .top_k = 2,
              .scheme = scheme(8, kChannelwise, true),
              .act_dtype = f16}},
    Scenario{"int4_g64_swigluoai_bias_m64_e8_top2",
             {.E = 8,
              .H = 128,
              .I = 128,
              .M = 64,
              .top_k = 2,
              .scheme = scheme(4, 64),
              .activation = Activation::swigluoai,
              .bias = true,
              .act_dtype = bf16}},
    Scenario{"int4_g128_relu2_weight_on_input_m300_e8_top1_f16",
             {.E = 8,
              .H = 256,
              .I = 256,
              .M = 300,
              .top_k = 1,
              .scheme = scheme(4, 128),
              .activation = Activation::relu2_no_mul,
              .act_dtype = f16,
              .router_weight_on_input = true}},
    // 33 and 36 groups with zero points: the zero-term pass's chunks of 32 groups with a partial
    // last chunk; ~300 rows per expert: whole 256-token tiles plus a remainder launch
    Scenario{"int4_g64_asym_m600_e2_top1_groups_33_36",
             {.E = 2,
              .H = 2112,
              .I = 2304,
              .M = 600,
              .top_k = 1,
              .scheme = scheme(4, 64, true),
              .act_dtype = bf16}},
    // act-order (g_idx): K sorted by group per expert, GEMM1's rows gathered in that order, w13's
    // rows permuted into w2's order
    Scenario{"int4_g128_actorder_asym_m300_e8_top2",
             {.E = 8,
              .H = 256,
              .I = 256,
              .M = 300,
              .top_k = 2,
              .scheme = scheme(4, 128, true, true),
              .act_dtype = bf16}},
    Scenario{"int4_g128_actorder_m1024_e16_top4_f16",
             {.E = 16,
              .H = 384,
              .I = 256,
              .M = 1024,
              .top_k = 4,
              .scheme = scheme(4, 128, false, true),
              .act_dtype = f16}},
    Scenario{"int4_g64_actorder_asym_swigluoai_bias_m64_e8_top2",
             {.E = 8,
              .H = 192,
              .I = 192,
              .M = 64,
              .top_k = 2,
              .scheme = scheme(4, 64, true, true),
              .activation = Activation::swigluoai,
              .bias = true,
              .act_dtype = bf16}},
    Scenario{"int8_g64_actorder_bias_m300_e8_top2_f16",
             {.E = 8,
              .H = 256,
              .I = 192,
              .M = 300,
              .top_k = 2,
              .scheme = scheme(8, 64, false, true),
              .bias = true,
              .act_dtype = f16}},
    Scenario{"int8_g128_actorder_asym_swigluoai_m4096_e16_top4",
             {.E = 16,
              .H = 256,
              .I = 256,
              .M = 4096,
              .top_k = 4,
              .scheme = scheme(8, 128, true, true),
              .activation = Activation::swigluoai,
              .act_dtype = bf16}},
    Scenario{"int4_g128_actorder_relu2_weight_on_input_m300_e8_top1",
             {.E = 8,
              .H = 256,
              .I = 256,
              .M = 300,
              .top_k = 1,
              .scheme = scheme(4, 128, false, true),
              .activation = Activation::relu2_no_mul,
              .act_dtype = bf16,
              .router_weight_on_input = true}},
    // 256 experts at 7 tokens: most experts get no rows at all
    Scenario{"int4_g128_asym_m7_e256_top8",
             {.E = 256,
              .H = 256,
              .I = 128,
              .M = 7,
              .top_k = 8,
              .scheme = scheme(4, 128, true),
              .act_dtype = bf16}},
    // MXFP4, re-coded as e4m3 at one scale per 64-channel window (mxfp4_recode.hpp): gpt-oss's
    // shape (H = I = 2880, 45 K tiles) with swigluoai and biases, then odd tiles, f16, a batch
    // where most experts get no rows, and 8192 tokens
    Scenario{"mxfp4_swigluoai_bias_m32_e4_top2_gpt_oss_shape",
             {.E = 4,
              .H = 2880,
              .I = 2880,
              .M = 32,
              .top_k = 2,
              .scheme = kMxfp4,
              .activation = Activation::swigluoai,
              .bias = true,
              .act_dtype = bf16}},
    Scenario{"mxfp4_swigluoai_bias_m300_e8_top2_n_not_whole_tiles_f16",
             {.E = 8,
              .H = 192,
              .I = 320,
              .M = 300,
              .top_k = 2,
              .scheme = kMxfp4,
              .activation = Activation::swigluoai,
              .bias = true,
              .act_dtype = f16}},
    Scenario{"mxfp4_swigluoai_m7_e128_top4",
             {.E = 128,
              .H = 128,
              .I = 128,
              .M = 7,
              .top_k = 4,
              .scheme = kMxfp4,
              .activation = Activation::swigluoai,
              .act_dtype = bf16}},
    Scenario{"mxfp4_silu_bias_m1024_e32_top4_f16",
             {.E = 32,
              .H = 256,
              .I = 192,
              .M = 1024,
              .top_k = 4,
              .scheme = kMxfp4,
              .bias = true,
              .act_dtype = f16}},
    Scenario{"mxfp4_swigluoai_bias_m8192_e8_top2",
             {.E = 8,
              .H = 256,
              .I = 256,
              .M = 8192,
              .top_k = 2,
              .scheme = kMxfp4,
              .activation = Activation::swigluoai,
              .bias = true,
              .act_dtype = bf16}},
};

INSTANTIATE_TEST_SUITE_P(Matrix, CudaWgmmaMatchesReference, testing::ValuesIn(kScenarios),
                         [](const testing::TestParamInfo<Scenario>& p) {
                           return std::string(p.param.name);
                         });

// w13 and w2 with different schemes: act-order on one of them only, gated halves or swigluoai's
// interleaved rows, bias on both (w13's bias rows move with its rows).
struct MixedScenario {
  const char* name;
  QuantScheme w13, w2;
  Activation activation = Activation::silu;
  DType act_dtype = bf16;
};
void PrintTo(const MixedScenario& s, std::ostream* os) { *os << s.name; }

class CudaWgmmaMixedSchemes : public CudaWgmma,
                              public testing::WithParamInterface<MixedScenario> {};

TEST_P(CudaWgmmaMixedSchemes, WithinDtypeBound) {
  const MixedScenario& s = GetParam();
  const int64_t E = 8, H = 256, I = 192, M = 300;
  MoEConfig config;
  config.num_experts = E;
  config.hidden = H;
  config.intermediate = I;
  config.routing.top_k = 2;
  config.activation = s.activation;
  config.w13_bias = config.w2_bias = true;
  std::mt19937_64 rng(5);
  QuantizedWeight w13 = test::random_weight(E, config.w13_rows(), H, s.w13, true, rng);
  QuantizedWeight w2 = test::random_weight(E, H, I, s.w2, true, rng);
  test::MoECase c =
      test::make_case(config, QuantizedExperts(std::move(w13), std::move(w2)), M, s.act_dtype, rng);
  expect_within_bound(c, s.act_dtype);
}

const MixedScenario kMixedScenarios[] = {
    {"w13_actorder_int4_g128_w2_int4_g64_asym", scheme(4, 128, false, true), scheme(4, 64, true)},
    {"w2_actorder_int4_g64_asym_w13_int4_g128_f16", scheme(4, 128), scheme(4, 64, true, true),
     Activation::silu, f16},
    {"w2_actorder_int8_g64_w13_int4_g64_swigluoai", scheme(4, 64), scheme(8, 64, false, true),
     Activation::swigluoai},
    {"w13_actorder_int8_g64_asym_w2_int4_g64_swigluoai_f16", scheme(8, 64, true, true),
     scheme(4, 64), Activation::swigluoai, f16},
    {"w2_actorder_int4_g64_w13_int8_g128_relu2", scheme(8, 128), scheme(4, 64, false, true),
     Activation::relu2_no_mul},
};

INSTANTIATE_TEST_SUITE_P(Matrix, CudaWgmmaMixedSchemes, testing::ValuesIn(kMixedScenarios),
                         [](const testing::TestParamInfo<MixedScenario>& p) {
                           return std::string(p.param.name);
                         });

// MXFP4 block scales up to 2^14 apart inside a 64-channel window (the most the e4m3 re-coding
// holds exactly): each block's exponent drawn uniformly from 2^-14..2^0.
TEST_F(CudaWgmma, Mxfp4BlockScalesFourteenApartWithinDtypeBound) {
  for (const DType dtype : {bf16, f16}) {
    const int64_t E = 8, H = 256, I = 128, M = 300;
    MoEConfig config;
    config.num_experts = E;
    config.hidden = H;
    config.intermediate = I;
    config.routing.top_k = 2;
    config.activation = Activation::swigluoai;
    config.w13_bias = config.w2_bias = true;
    std::mt19937_64 rng(6);
    std::uniform_int_distribution<int> exponent(127 - 14, 127);
    auto spread = [&](QuantizedWeight w) {
      for (uint8_t& s : w.scales.span<uint8_t>()) s = uint8_t(exponent(rng));
      return w;
    };
    QuantizedWeight w13 = spread(test::random_weight(E, config.w13_rows(), H, kMxfp4, true, rng));
    QuantizedWeight w2 = spread(test::random_weight(E, H, I, kMxfp4, true, rng));
    test::MoECase c =
        test::make_case(config, QuantizedExperts(std::move(w13), std::move(w2)), M, dtype, rng);
    ASSERT_GE(describe(*c.experts, c.config).mxfp4_window_spread, 12);
    expect_within_bound(c, dtype);
  }
}

TEST_F(CudaWgmma, RouterLogitsForwardMatchesRoutedForward) {
  const CaseSpec spec{.E = 8,
                      .H = 256,
                      .I = 128,
                      .M = 300,
                      .top_k = 2,
                      .scheme = scheme(4, 128),
                      .act_dtype = bf16};
  test::MoECase c = test::make_case(spec);
  c.config.activation_dtype = spec.act_dtype;
  MoE moe(c.config, *c.experts, "cuda-wgmma", kGpu);
  OnDevice hidden(c.hidden), logits(c.router_logits);
  OnDevice out = poisoned_output(bf16, spec.M, spec.H);
  moe.forward(hidden.view, logits.view, out.view);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_LT(test::relative_error(download(out, bf16, spec.M, spec.H), c.reference),
            bound_for(bf16));
}

TEST_F(CudaWgmma, RefusesUnevenActOrderGroupsAndOtherActivationDtypes) {
  test::MoECase ao = test::make_case({.E = 4,
                                      .H = 128,
                                      .I = 128,
                                      .M = 2,
                                      .top_k = 2,
                                      .scheme = scheme(4, 64, false, true),
                                      .act_dtype = bf16});
  // one channel of expert 2's w13 moved from group 0 into group 1
  QuantizedWeight w13 = ao.experts->w13().clone();
  int32_t* g_idx = w13.g_idx.data_as<int32_t>() + 2 * w13.K;
  *std::find(g_idx, g_idx + w13.K, 0) = 1;
  const QuantizedExperts uneven(std::move(w13), ao.experts->w2().clone());
  ao.config.activation_dtype = bf16;
  test::expect_error([&] { MoE(ao.config, uneven, "cuda-wgmma", kGpu); },
                     "act-order groups of unequal size");
  test::expect_error([&] { find_backend("cuda-wgmma")->prepare(uneven, ao.config, kGpu); },
                     "w13.g_idx: expert 2 has 63 channels in group 0");
  test::MoECase c = test::make_case(
      {.E = 4, .H = 128, .I = 128, .M = 2, .top_k = 2, .scheme = scheme(4, 64), .act_dtype = bf16});
  MoE moe(c.config, *c.experts, "cuda-wgmma", kGpu);
  Buffer as_f16(f16, {2, 128});
  OnDevice hidden(as_f16), weights(c.topk_weights), ids(c.topk_ids);
  OnDevice out = poisoned_output(f16, 2, 128);
  EXPECT_THROW(moe.forward_routed(hidden.view, weights.view, ids.view, out.view), Error);
}

}  // namespace
}  // namespace qmoe
