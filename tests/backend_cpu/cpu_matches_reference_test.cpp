// The cpu backend against the independent float64 reference (src/sample/reference_moe.hpp), for
// every SIMD variant this machine runs (forced through QMOE_CPU_ISA), over every scheme it declares
// and shapes chosen to hit the packing edges: H and I not multiples of 16/64 (padded panels), E not
// a power of two, top-k up to 8, M from 1 to 300 (token tiles with remainders), f32/f16/bf16
// activations.
//
// Error bound, normalized ||out - ref|| / ||ref||:
//   f32 math: dequantization as q*s - z*s in one FMA (<= 2 ulp per weight), f32 accumulation
//   over K <= 320 and an f32 intermediate. Measured errors sit near 1e-6; 1e-5 leaves margin
//   while a wrong group, zero point, permutation or bias gives errors of order 1e-1.
//   Output rounding: every element is rounded once to the output dtype, which moves it by at most
//   the unit roundoff u relative (2^-11 for f16, 2^-8 for bf16), so the norm ratio grows by at
//   most u. Inputs are not a source: the reference reads the same f16/bf16 values.
//   The avx512bf16 variant with bf16 activations runs GEMM1 with bf16 dot products (codes are
//   exact in bf16 and their products with bf16 inputs exact in f32: nothing new) and rounds the
//   intermediate (activation output) to bf16 for GEMM2, as a bf16 model does: a second relative
//   error of at most u per intermediate element, which W2 carries to the output at about the same
//   relative size. So bf16 gets 2u. Measured: ~1.7e-3 (f32 intermediate), ~2.4e-3 (bf16).
#include <gtest/gtest.h>

#include <string>

#include "backend/cpu/isa.hpp"
#include "backend_cpu/isa_scope.hpp"
#include "qmoe/moe.hpp"
#include "support/moe_case.hpp"

namespace qmoe {
namespace {

using test::CaseSpec;

using test::Scenario;

using test::scheme;

double bound_for(DType dtype) {
  const double f32_math = 1e-5;
  if (dtype == DType::f16) return f32_math + 1.0 / 2048;
  if (dtype == DType::bf16) return f32_math + 2.0 / 256;
  return f32_math;
}

const QuantScheme kMxfp4{.kind = WeightKind::mxfp4, .bits = 4, .group_size = 32};

const Scenario kScenarios[] = {
    {"int4_g128_sym_decode", {.E = 8, .H = 256, .I = 128, .M = 1, .top_k = 2}},
    {"int4_g128_E13_top8_M1",
     {.E = 13, .H = 256, .I = 256, .M = 1, .top_k = 8, .scheme = scheme(4, 128)}},
    {"int4_g32_asym_bias",
     {.E = 6, .H = 160, .I = 96, .M = 7, .top_k = 3, .scheme = scheme(4, 32, true), .bias = true}},
    {"int4_g64_act_order_f16",
     {.E = 7,
      .H = 192,
      .I = 128,
      .M = 64,
      .top_k = 4,
      .scheme = scheme(4, 64, false, true),
      .act_dtype = DType::f16}},
    {"int4_channelwise_asym_swigluoai_top8",
     {.E = 9,
      .H = 72,
      .I = 40,
      .M = 13,
      .top_k = 8,
      .scheme = scheme(4, kChannelwise, true),
      .activation = Activation::swigluoai}},
    {"int4_g32_swigluoai_uninterleave_bias_M300_bf16",
     {.E = 10,
      .H = 96,
      .I = 64,
      .M = 300,
      .top_k = 8,
      .scheme = scheme(4, 32),
      .activation = Activation::swigluoai_uninterleave,
      .bias = true,
      .act_dtype = DType::bf16}},
    {"int4_g24_gelu_tanh_no_mul",
     {.E = 5,
      .H = 96,
      .I = 72,
      .M = 9,
      .top_k = 2,
      .scheme = scheme(4, 24),
      .activation = Activation::gelu_tanh_no_mul}},
    {"int4_g16_asym_relu2_no_mul_weight_on_input",
     {.E = 5,
      .H = 64,
      .I = 48,
      .M = 17,
      .top_k = 1,
      .scheme = scheme(4, 16, true),
      .activation = Activation::relu2_no_mul,
      .router_weight_on_input = true}},
    {"int4_g64_act_order_gelu_no_mul_weight_on_input_bf16",
     {.E = 6,
      .H = 128,
      .I = 64,
      .M = 33,
      .top_k = 1,
      .scheme = scheme(4, 64, false, true),
      .activation = Activation::gelu_no_mul,
      .act_dtype = DType::bf16,
      .router_weight_on_input = true}},
    {"int8_channelwise_gelu_bf16",
     {.E = 5,
      .H = 200,
      .I = 100,
      .M = 37,
      .top_k = 3,
      .scheme = scheme(8, kChannelwise),
      .activation = Activation::gelu,
      .act_dtype = DType::bf16}},
    {"int8_g64_asym_act_order_bias_gelu_tanh",
     {.E = 3,
      .H = 128,
      .I = 192,
      .M = 200,
      .top_k = 3,
      .scheme = scheme(8, 64, true, true),
      .activation = Activation::gelu_tanh,
      .bias = true}},
    {"int8_g32_silu_no_mul_f16",
     {.E = 4,
      .H = 96,
      .I = 96,
      .M = 5,
      .top_k = 2,
      .scheme = scheme(8, 32),
      .activation = Activation::silu_no_mul,
      .act_dtype = DType::f16}},
    {"int8_g5_odd_group_asym",
     {.E = 3, .H = 40, .I = 35, .M = 11, .top_k = 2, .scheme = scheme(8, 5, true)}},
    {"int4_g32_act_order_bf16",
     {.E = 6,
      .H = 128,
      .I = 96,
      .M = 40,
      .top_k = 2,
      .scheme = scheme(4, 32, false, true),
      .act_dtype = DType::bf16}},
    {"int8_g32_asym_bf16",
     {.E = 5,
      .H = 96,
      .I = 64,
      .M = 20,
      .top_k = 2,
      .scheme = scheme(8, 32, true),
      .act_dtype = DType::bf16}},
    {"int4_g128_asym_M256",
     {.E = 16, .H = 256, .I = 128, .M = 256, .top_k = 4, .scheme = scheme(4, 128, true)}},
    // MXFP4 as gpt-oss runs it: interleaved clamped SwiGLU, biases on both GEMMs, bf16.
    {"mxfp4_swigluoai_bias_bf16",
     {.E = 8,
      .H = 96,
      .I = 64,
      .M = 5,
      .top_k = 4,
      .scheme = kMxfp4,
      .activation = Activation::swigluoai,
      .bias = true,
      .act_dtype = DType::bf16}},
    {"mxfp4_uninterleave_bias_E32_M300",
     {.E = 32,
      .H = 160,
      .I = 96,
      .M = 300,
      .top_k = 4,
      .scheme = kMxfp4,
      .activation = Activation::swigluoai_uninterleave,
      .bias = true}},
    {"mxfp4_silu_E13_M1_f16",
     {.E = 13, .H = 64, .I = 224, .M = 1, .top_k = 3, .scheme = kMxfp4, .act_dtype = DType::f16}},
};

struct Param {
  cpu::Isa isa;
  Scenario scenario;
};

void PrintTo(const Param& p, std::ostream* os) {
  *os << cpu::name(p.isa) << " " << p.scenario.name;
}

std::vector<Param> all_params() {
  std::vector<Param> params;
  for (cpu::Isa isa : cpu::supported_isas())
    for (const Scenario& s : kScenarios) params.push_back({isa, s});
  return params;
}

class CpuMatchesReference : public testing::TestWithParam<Param> {};

TEST_P(CpuMatchesReference, WithinStatedBound) {
  const CaseSpec& spec = GetParam().scenario.spec;
  test::IsaScope isa(std::string(cpu::name(GetParam().isa)));
  test::MoECase c = test::make_case(spec);
  MoE moe(c.config, *c.experts, "cpu");
  Buffer out(spec.act_dtype, {spec.M, spec.H});
  std::mt19937_64 rng(99);
  test::fill_normal(out, rng, 1e6);  // poison: every element must be written
  moe.forward_routed(c.hidden.view(), c.topk_weights.view(), c.topk_ids.view(), out.view());
  EXPECT_LT(test::relative_error(out, c.reference), bound_for(spec.act_dtype));

  // Handed over (each canonical weight freed once packed), the experts must pack the same bits.
  const MoE owning(c.config, c.experts->clone(), "cpu");
  Buffer owned_out(spec.act_dtype, {spec.M, spec.H});
  test::fill_normal(owned_out, rng, 1e6);
  owning.forward_routed(c.hidden.view(), c.topk_weights.view(), c.topk_ids.view(),
                        owned_out.view());
  EXPECT_LT(test::relative_error(owned_out, c.reference), bound_for(spec.act_dtype));
  EXPECT_EQ(test::relative_error(owned_out, out.clone()), 0.0);
}

INSTANTIATE_TEST_SUITE_P(Matrix, CpuMatchesReference, testing::ValuesIn(all_params()),
                         [](const testing::TestParamInfo<Param>& p) {
                           return std::string(cpu::name(p.param.isa)) + "_" + p.param.scenario.name;
                         });

}  // namespace
}  // namespace qmoe
