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
// input) over M in {1, 7, 64, 300, 1024, 1100, 4096, 8192}, with N not a multiple of the 128-row
// tile, experts that get no rows, and experts whose rows end in a short tail (the second launch).
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include "cuda/device.hpp"
#include "cuda/gpu_test.hpp"
#include "cuda_mma/on_device.hpp"
#include "qmoe/error.hpp"
#include "qmoe/moe.hpp"
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

// wgmma needs compute capability 9.0 exactly.
#define QMOE_REQUIRE_SM90()                                                                  \
  do {                                                                                       \
    QMOE_REQUIRE_GPU();                                                                      \
    if (const CudaDeviceInfo d = current_cuda_device(); d.sm_major * 10 + d.sm_minor != 90)  \
      GTEST_SKIP() << "needs an sm_90 GPU (Hopper) for wgmma, this one is sm_" << d.sm_major \
                   << d.sm_minor;                                                            \
  } while (0)

class CudaWgmma : public testing::Test {
 protected:
  void SetUp() override { QMOE_REQUIRE_SM90(); }
};

class CudaWgmmaMatchesReference : public CudaWgmma, public testing::WithParamInterface<Scenario> {};

TEST_P(CudaWgmmaMatchesReference, WithinDtypeBound) {
  const CaseSpec& spec = GetParam().spec;
  test::MoECase c = test::make_case(spec);
  c.config.activation_dtype = spec.act_dtype;
  MoE moe(c.config, *c.experts, "cuda-wgmma", kGpu);
  OnDevice hidden(c.hidden), weights(c.topk_weights), ids(c.topk_ids);
  OnDevice out = poisoned_output(spec.act_dtype, spec.M, spec.H);
  moe.forward_routed(hidden.view, weights.view, ids.view, out.view);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const Buffer result = download(out, spec.act_dtype, spec.M, spec.H);
  EXPECT_LT(test::relative_error(result, c.reference), bound_for(spec.act_dtype));
}

constexpr DType bf16 = DType::bf16, f16 = DType::f16;

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
    // 17 and 20 groups with zero points: the zero-term pass's group chunks of 16 with a partial
    // last chunk; ~275 rows per expert: whole 256-token tiles plus a tail launch
    Scenario{"int4_g64_asym_m1100_e4_top1_groups_17_20",
             {.E = 4,
              .H = 1088,
              .I = 1280,
              .M = 1100,
              .top_k = 1,
              .scheme = scheme(4, 64, true),
              .act_dtype = bf16}},
    // 256 experts at 7 tokens: most experts get no rows at all
    Scenario{"int4_g128_asym_m7_e256_top8",
             {.E = 256,
              .H = 256,
              .I = 128,
              .M = 7,
              .top_k = 8,
              .scheme = scheme(4, 128, true),
              .act_dtype = bf16}},
};

INSTANTIATE_TEST_SUITE_P(Matrix, CudaWgmmaMatchesReference, testing::ValuesIn(kScenarios),
                         [](const testing::TestParamInfo<Scenario>& p) {
                           return std::string(p.param.name);
                         });

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

TEST_F(CudaWgmma, RefusesActOrderAndOtherActivationDtypes) {
  test::MoECase ao = test::make_case({.E = 4,
                                      .H = 128,
                                      .I = 128,
                                      .M = 2,
                                      .top_k = 2,
                                      .scheme = scheme(4, 64, false, true),
                                      .act_dtype = bf16});
  EXPECT_THROW(MoE(ao.config, *ao.experts, "cuda-wgmma", kGpu), Error);
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
