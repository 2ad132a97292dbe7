// cuda-mma against the independent float64 reference (src/sample/reference_moe.hpp) on fresh
// random data.
//
// Bounds, normalized error ||out - ref|| / ||ref||: the codes enter the mma as exact integers
// and accumulate in fp32, so the error comes from the four roundings to the activation dtype
// (GEMM1 out, activation out, GEMM2 out, final out) plus 16-bit scales. Each rounding is a
// relative error of at most 2^-9 (bf16) or 2^-12 (f16) per element, about a third of that in rms,
// so four of them land near 2.5e-3 (bf16) and 3e-4 (f16). Shared int4 tiles with two strips per
// warp (expert_gemm.hpp) add a fifth, each weight times its scale rounded to the activation dtype:
// measured 3.8e-3 to 4.8e-3 in bf16 (moe_bench). Bounds: 1e-2 and 2e-3. A wrong group, zero point,
// permutation or bias gives errors of order 1e-1 and more.
//
// The matrix is a covering subset, not the Cartesian product (the float64 reference is the cost):
// every scheme (int4/int8, sym/asym, g32/g64/g128/channelwise, act-order, bias, MXFP4) appears with
// at least two batch sizes from {1, 2, 7, 16, 33, 128, 1000, 4096}, every tile size (8, 16, 32, 48,
// 64 rows) and every E in {8, 60, 128, 256} and top-k in {1, 2, 6, 8} appear, and H or I is not a
// multiple of 128 (and, channelwise, not a multiple of 32) in most rows.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <set>
#include <thread>
#include <vector>

#include "backend/backend.hpp"
#include "backend/cuda_mma/cuda_mma.hpp"
#include "backend/cuda_mma/expert_gemm.hpp"
#include "cuda/align.hpp"
#include "cuda/device.hpp"
#include "cuda/device_buffer.hpp"
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
using test::scheme;

double bound_for(DType dtype) { return dtype == DType::bf16 ? 1e-2 : 2e-3; }

class CudaMma : public testing::Test {
 protected:
  void SetUp() override { QMOE_REQUIRE_GPU(); }
};

using test::Scenario;

class CudaMmaMatchesReference : public CudaMma, public testing::WithParamInterface<Scenario> {};

TEST_P(CudaMmaMatchesReference, WithinDtypeBound) {
  const CaseSpec& spec = GetParam().spec;
  test::MoECase c = test::make_case(spec);
  MoE moe(c.config, *c.experts, "cuda-mma", kGpu);
  OnDevice hidden(c.hidden), weights(c.topk_weights), ids(c.topk_ids);
  OnDevice out = poisoned_output(spec.act_dtype, spec.M, spec.H);
  moe.forward_routed(hidden.view, weights.view, ids.view, out.view);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const Buffer result = download(out, spec.act_dtype, spec.M, spec.H);
  EXPECT_LT(test::relative_error(result, c.reference), bound_for(spec.act_dtype));
}

constexpr DType bf16 = DType::bf16, f16 = DType::f16;
const QuantScheme kMxfp4{.kind = WeightKind::mxfp4, .bits = 4, .group_size = 32};
constexpr Activation gelu = Activation::gelu, swigluoai = Activation::swigluoai,
                     relu2 = Activation::relu2_no_mul, gelu_tanh = Activation::gelu_tanh;

const Scenario kScenarios[] = {
    // int4 g128 symmetric, the headline scheme, over the batch sizes and tile sizes.
    Scenario{"int4_g128_m1_e8_top2",
             {.E = 8,
              .H = 256,
              .I = 384,
              .M = 1,
              .top_k = 2,
              .scheme = scheme(4, 128),
              .act_dtype = bf16}},
    Scenario{"int4_g128_m2_e128_top8",
             {.E = 128,
              .H = 384,
              .I = 128,
              .M = 2,
              .top_k = 8,
              .scheme = scheme(4, 128),
              .act_dtype = bf16}},
    Scenario{"int4_g128_m16_e60_top6_f16",
             {.E = 60,
              .H = 256,
              .I = 256,
              .M = 16,
              .top_k = 6,
              .scheme = scheme(4, 128),
              .act_dtype = f16}},
    Scenario{"int4_g128_m36_e8_top2_tile16",
             {.E = 8,
              .H = 256,
              .I = 256,
              .M = 36,
              .top_k = 2,
              .scheme = scheme(4, 128),
              .act_dtype = bf16}},
    Scenario{"int4_g128_m128_e8_top2_tile48",
             {.E = 8,
              .H = 256,
              .I = 128,
              .M = 128,
              .top_k = 2,
              .scheme = scheme(4, 128),
              .act_dtype = bf16}},
    Scenario{"int4_g128_m4096_e8_top1_bias",
             {.E = 8,
              .H = 128,
              .I = 128,
              .M = 4096,
              .top_k = 1,
              .scheme = scheme(4, 128),
              .bias = true,
              .act_dtype = bf16}},
    // asymmetric int4, odd H / I (multiples of 32 but not of 128)
    Scenario{"int4_g32_asym_m7_e256_top8",
             {.E = 256,
              .H = 160,
              .I = 96,
              .M = 7,
              .top_k = 8,
              .scheme = scheme(4, 32, true),
              .act_dtype = bf16}},
    Scenario{"int4_g64_asym_m33_e60_top6_f16_gelu",
             {.E = 60,
              .H = 192,
              .I = 320,
              .M = 33,
              .top_k = 6,
              .scheme = scheme(4, 64, true),
              .activation = gelu,
              .act_dtype = f16}},
    Scenario{"int4_g128_asym_m1000_e60_top2_bias",
             {.E = 60,
              .H = 128,
              .I = 256,
              .M = 1000,
              .top_k = 2,
              .scheme = scheme(4, 128, true),
              .bias = true,
              .act_dtype = bf16}},
    Scenario{"int4_g32_sym_m16_e8_top2",
             {.E = 8,
              .H = 224,
              .I = 96,
              .M = 16,
              .top_k = 2,
              .scheme = scheme(4, 32),
              .act_dtype = bf16}},
    // channelwise: K not a multiple of 32 or 16, padded inside the layout
    Scenario{"int4_channelwise_m2_e8_top2_odd_k",
             {.E = 8,
              .H = 200,
              .I = 72,
              .M = 2,
              .top_k = 2,
              .scheme = scheme(4, kChannelwise),
              .act_dtype = bf16}},
    // channelwise with 6 and 3 spans per group: the decode loop's flush every 2 and 1 spans
    Scenario{"int4_channelwise_m4_e8_top2_six_and_three_spans",
             {.E = 8,
              .H = 192,
              .I = 96,
              .M = 4,
              .top_k = 2,
              .scheme = scheme(4, kChannelwise),
              .act_dtype = bf16}},
    Scenario{"int4_channelwise_asym_m33_e128_top8_f16",
             {.E = 128,
              .H = 136,
              .I = 40,
              .M = 33,
              .top_k = 8,
              .scheme = scheme(4, kChannelwise, true),
              .act_dtype = f16}},
    // act-order: per-expert K permutation, activations gathered at run time
    Scenario{"int4_act_order_g32_m7_e8_top2",
             {.E = 8,
              .H = 128,
              .I = 96,
              .M = 7,
              .top_k = 2,
              .scheme = scheme(4, 32, false, true),
              .act_dtype = bf16}},
    Scenario{"int8_act_order_g128_m1000_e8_top2_tile64",
             {.E = 8,
              .H = 128,
              .I = 128,
              .M = 1000,
              .top_k = 2,
              .scheme = scheme(8, 128, false, true),
              .act_dtype = bf16}},
    Scenario{"int4_act_order_g64_asym_m128_e60_top6_f16_bias",
             {.E = 60,
              .H = 192,
              .I = 128,
              .M = 128,
              .top_k = 6,
              .scheme = scheme(4, 64, true, true),
              .bias = true,
              .act_dtype = f16}},
    // int8
    Scenario{"int8_g128_m1_e256_top8",
             {.E = 256,
              .H = 256,
              .I = 128,
              .M = 1,
              .top_k = 8,
              .scheme = scheme(8, 128),
              .act_dtype = bf16}},
    Scenario{"int8_g128_m1000_e8_top2_f16",
             {.E = 8,
              .H = 128,
              .I = 128,
              .M = 1000,
              .top_k = 2,
              .scheme = scheme(8, 128),
              .act_dtype = f16}},
    Scenario{"int8_g32_asym_m33_e60_top6_bias",
             {.E = 60,
              .H = 96,
              .I = 160,
              .M = 33,
              .top_k = 6,
              .scheme = scheme(8, 32, true),
              .bias = true,
              .act_dtype = bf16}},
    // 64 rows per expert and 125 strips: GEMM1's warps share their activations (one K
    // slice per CTA), the last N tile has warps past the last strip, and there are more work
    // items than resident CTAs (the barrier that starts a sharing CTA's next item). Shared by
    // a margin: 8 activation bytes per code byte, the plan shares from 6.
    Scenario{"int4_channelwise_m256_e8_top2_tile32_shared",
             {.E = 8,
              .H = 256,
              .I = 1000,
              .M = 256,
              .top_k = 2,
              .scheme = scheme(4, kChannelwise),
              .act_dtype = bf16}},
    // The same at 48-row tiles, whose 12 activation slots per iteration do not split evenly
    // over the 8 warps that copy them; 300 strips, so ~300 work items for 264 resident CTAs
    // on an H200.
    Scenario{"int4_channelwise_m144_e8_top2_tile48_shared",
             {.E = 8,
              .H = 256,
              .I = 2400,
              .M = 144,
              .top_k = 2,
              .scheme = scheme(4, kChannelwise),
              .act_dtype = bf16}},
    // GEMM1 with two strips per warp side by side (scales folded into the weights): 600 strips,
    // so 38 pair items per 48-row tile and ~300 items for 264 resident CTAs on an H200; with zero
    // points and f16 (the tighter bound). GEMM2 (16 strips) keeps one strip per warp.
    Scenario{"int4_g64_asym_m144_e8_top2_f16_tile48_pairs",
             {.E = 8,
              .H = 256,
              .I = 4800,
              .M = 144,
              .top_k = 2,
              .scheme = scheme(4, 64, true),
              .act_dtype = f16}},
    // The same sharing over 16 chunks of K (GEMM1: 8 strips x 1 slice by the plan's
    // model), so the shared loop runs whole unchecked trips, not only its checked tail;
    // GEMM2's K (992) is not whole chunks, so it must not share. At 32 and 48 rows.
    Scenario{"int4_g32_m256_e8_top2_tile32_shared_long_k",
             {.E = 8,
              .H = 1024,
              .I = 992,
              .M = 256,
              .top_k = 2,
              .scheme = scheme(4, 32),
              .act_dtype = bf16}},
    Scenario{"int4_g32_m144_e8_top2_tile48_shared_long_k",
             {.E = 8,
              .H = 1024,
              .I = 992,
              .M = 144,
              .top_k = 2,
              .scheme = scheme(4, 32),
              .act_dtype = bf16}},
    Scenario{"int8_g64_asym_m256_e8_top2_f16_tile32",
             {.E = 8,
              .H = 384,
              .I = 192,
              .M = 256,
              .top_k = 2,
              .scheme = scheme(8, 64, true),
              .act_dtype = f16}},
    Scenario{"int8_g64_m144_e8_top2_tile48",
             {.E = 8,
              .H = 320,
              .I = 192,
              .M = 144,
              .top_k = 2,
              .scheme = scheme(8, 64),
              .act_dtype = bf16}},
    Scenario{"int8_channelwise_asym_m16_e128_top8_f16",
             {.E = 128,
              .H = 200,
              .I = 56,
              .M = 16,
              .top_k = 8,
              .scheme = scheme(8, kChannelwise, true),
              .act_dtype = f16}},
    Scenario{"int8_act_order_g64_m7_e8_top2",
             {.E = 8,
              .H = 192,
              .I = 128,
              .M = 7,
              .top_k = 2,
              .scheme = scheme(8, 64, false, true),
              .act_dtype = bf16}},
    Scenario{"int8_g64_m4096_e8_top2_tile64",
             {.E = 8,
              .H = 64,
              .I = 64,
              .M = 4096,
              .top_k = 2,
              .scheme = scheme(8, 64),
              .act_dtype = bf16}},
    // activations and the router weight on the input side
    Scenario{"int4_g64_swigluoai_bias_m7_e8_top2",
             {.E = 8,
              .H = 128,
              .I = 64,
              .M = 7,
              .top_k = 2,
              .scheme = scheme(4, 64),
              .activation = swigluoai,
              .bias = true,
              .act_dtype = bf16}},
    // K long enough (H 4096) for GEMM1's warps to run at least five iterations, so the staged
    // loop's unchecked three-iteration trips run, not only its checked tail (8-, 16- and
    // 32-row tiles; g32 flushes every span, channelwise once per range).
    Scenario{"int4_g128_asym_m1_e4_top4_long_k",
             {.E = 4,
              .H = 4096,
              .I = 1536,
              .M = 1,
              .top_k = 4,
              .scheme = scheme(4, 128, true),
              .act_dtype = bf16}},
    Scenario{"int4_g32_m12_e4_top4_long_k_f16",
             {.E = 4,
              .H = 4096,
              .I = 768,
              .M = 12,
              .top_k = 4,
              .scheme = scheme(4, 32),
              .act_dtype = f16}},
    Scenario{"int8_g32_asym_m1_e4_top4_long_k",
             {.E = 4,
              .H = 4096,
              .I = 1536,
              .M = 1,
              .top_k = 4,
              .scheme = scheme(8, 32, true),
              .act_dtype = bf16}},
    Scenario{"int4_channelwise_m40_e4_top4_long_k",
             {.E = 4,
              .H = 4096,
              .I = 768,
              .M = 40,
              .top_k = 4,
              .scheme = scheme(4, kChannelwise),
              .act_dtype = bf16}},
    // GEMM1 applies the activation itself: gate/up halves with a partial last strip (I 36),
    // and a no_mul kind in f16
    Scenario{"int4_channelwise_swigluoai_uninterleave_i36_bias",
             {.E = 8,
              .H = 128,
              .I = 36,
              .M = 5,
              .top_k = 2,
              .scheme = scheme(4, kChannelwise),
              .activation = Activation::swigluoai_uninterleave,
              .bias = true,
              .act_dtype = bf16}},
    // H 64 is one chunk of K, so GEMM1 runs one warp per strip and, at 16-row tiles, each
    // warp finishes its strip from its registers (no K split, nothing shared): gated with
    // bias and zero points; a no_mul kind with the router weight on the input, N not whole
    // strips, f16.
    Scenario{"int4_g32_asym_silu_bias_h64_warp_epilogue",
             {.E = 8,
              .H = 64,
              .I = 96,
              .M = 40,
              .top_k = 2,
              .scheme = scheme(4, 32, true),
              .bias = true,
              .act_dtype = bf16}},
    Scenario{"int4_channelwise_relu2_no_mul_on_input_h64_i40_warp_epilogue",
             {.E = 8,
              .H = 64,
              .I = 40,
              .M = 100,
              .top_k = 1,
              .scheme = scheme(4, kChannelwise),
              .activation = relu2,
              .act_dtype = f16,
              .router_weight_on_input = true}},
    // The same epilogue at 32 rows (unshared: neither K is whole 64-channel chunks) in GEMM2 (K 48
    // is
    // one chunk), and at 64 rows in both GEMMs with a single activation and the router
    // weight on the input; both with bias on N not whole strips (72, 40), whose rows past N
    // must not read it.
    Scenario{"int4_channelwise_bias_m80_h72_i48_warp_epilogue_tile32",
             {.E = 8,
              .H = 72,
              .I = 48,
              .M = 80,
              .top_k = 2,
              .scheme = scheme(4, kChannelwise),
              .bias = true,
              .act_dtype = bf16}},
    Scenario{"int4_channelwise_relu2_on_input_bias_m2048_h64_i40_warp_epilogue_tile64",
             {.E = 8,
              .H = 64,
              .I = 40,
              .M = 2048,
              .top_k = 1,
              .scheme = scheme(4, kChannelwise),
              .activation = relu2,
              .bias = true,
              .act_dtype = bf16,
              .router_weight_on_input = true}},
    Scenario{"int4_g32_silu_top1_on_input_bias",
             {.E = 8,
              .H = 128,
              .I = 96,
              .M = 6,
              .top_k = 1,
              .scheme = scheme(4, 32),
              .bias = true,
              .act_dtype = bf16,
              .router_weight_on_input = true}},
    Scenario{"int4_g64_gelu_no_mul_m3_e8_top2_f16",
             {.E = 8,
              .H = 128,
              .I = 128,
              .M = 3,
              .top_k = 2,
              .scheme = scheme(4, 64),
              .activation = Activation::gelu_no_mul,
              .act_dtype = f16}},
    Scenario{"int4_g32_relu2_no_mul_top1_on_input",
             {.E = 8,
              .H = 96,
              .I = 64,
              .M = 33,
              .top_k = 1,
              .scheme = scheme(4, 32),
              .activation = relu2,
              .act_dtype = bf16,
              .router_weight_on_input = true}},
    Scenario{"int8_g128_gelu_tanh_m2_e60_top1_f16",
             {.E = 60,
              .H = 256,
              .I = 128,
              .M = 2,
              .top_k = 1,
              .scheme = scheme(8, 128),
              .activation = gelu_tanh,
              .act_dtype = f16}},
    // 64-row tiles on the staged loop: shared activations over 16 chunks of K (whole unchecked
    // trips; GEMM2's K of 992 is not whole chunks and takes the general loop), a K split with
    // nothing shared (GEMM1: 4 work items of 8 strips, so 1 strip x 8 K slices), and int8.
    Scenario{"int4_g32_m320_e8_top2_tile64_shared_long_k",
             {.E = 8,
              .H = 1024,
              .I = 992,
              .M = 320,
              .top_k = 2,
              .scheme = scheme(4, 32),
              .act_dtype = bf16}},
    Scenario{"int4_g64_m200_e2_top1_tile64_k_split",
             {.E = 2,
              .H = 1024,
              .I = 64,
              .M = 200,
              .top_k = 1,
              .scheme = scheme(4, 64),
              .act_dtype = bf16}},
    Scenario{"int8_g64_asym_m520_e8_top2_f16_tile64",
             {.E = 8,
              .H = 384,
              .I = 192,
              .M = 520,
              .top_k = 2,
              .scheme = scheme(8, 64, true),
              .act_dtype = f16}},
    // MXFP4 (e2m1 codes, one e8m0 scale per 32 k): gpt-oss's decode shape (H = I = 2880, K
    // padded to whole 64-k chunks) with its interleaved clamped SwiGLU and biases, then the
    // batch sizes and paths of the int4 rows above: de-interleaved halves, f16, two strips per
    // warp with the scales folded into the weights (I = 4800 at 144 rows), shared activations
    // over long K, and 4096 tokens.
    Scenario{"mxfp4_m1_e4_top4_h2880_swigluoai_bias",
             {.E = 4,
              .H = 2880,
              .I = 2880,
              .M = 1,
              .top_k = 4,
              .scheme = kMxfp4,
              .activation = swigluoai,
              .bias = true,
              .act_dtype = bf16}},
    Scenario{"mxfp4_m7_e128_top4_swigluoai_bias_f16",
             {.E = 128,
              .H = 96,
              .I = 160,
              .M = 7,
              .top_k = 4,
              .scheme = kMxfp4,
              .activation = swigluoai,
              .bias = true,
              .act_dtype = f16}},
    Scenario{"mxfp4_m48_e8_top2_uninterleave",
             {.E = 8,
              .H = 224,
              .I = 96,
              .M = 48,
              .top_k = 2,
              .scheme = kMxfp4,
              .activation = Activation::swigluoai_uninterleave,
              .act_dtype = bf16}},
    Scenario{
        "mxfp4_m144_e8_top2_pairs",
        {.E = 8, .H = 256, .I = 4800, .M = 144, .top_k = 2, .scheme = kMxfp4, .act_dtype = bf16}},
    Scenario{
        "mxfp4_m256_e8_top2_shared_long_k_f16",
        {.E = 8, .H = 1024, .I = 992, .M = 256, .top_k = 2, .scheme = kMxfp4, .act_dtype = f16}},
    Scenario{"mxfp4_m1000_e60_top2_bias_f16",
             {.E = 60,
              .H = 160,
              .I = 128,
              .M = 1000,
              .top_k = 2,
              .scheme = kMxfp4,
              .bias = true,
              .act_dtype = f16}},
    Scenario{"mxfp4_m4096_e8_top1_swigluoai_bias",
             {.E = 8,
              .H = 128,
              .I = 128,
              .M = 4096,
              .top_k = 1,
              .scheme = kMxfp4,
              .activation = swigluoai,
              .bias = true,
              .act_dtype = bf16}},
};

INSTANTIATE_TEST_SUITE_P(Schemes, CudaMmaMatchesReference, testing::ValuesIn(kScenarios),
                         [](const testing::TestParamInfo<Scenario>& p) {
                           return std::string(p.param.name);
                         });

// Every scenario's case builds on the CPU (a group size that does not divide K, say, is refused
// there), so CI finds a malformed scenario that the GPU tests, which skip here before building
// their case, would reveal only on a device.
TEST(CudaMmaScenarios, EveryCaseBuilds) {
  for (const Scenario& s : kScenarios) EXPECT_NO_THROW(test::make_case(s.spec)) << s.name;
}

// A scenario named "..._tileN" is there to run N-row tiles (its comment says what it reaches):
// it must still get them when choose_tile_rows changes. Host only, no GPU needed.
TEST(CudaMmaScenarios, TileInTheNameIsTheChosenTile) {
  std::set<int> labelled;
  for (const Scenario& s : kScenarios) {
    const std::string name = s.name;
    const size_t at = name.find("_tile");
    if (at == std::string::npos) continue;
    const int tile = std::stoi(name.substr(at + 5));
    labelled.insert(tile);
    EXPECT_EQ(cuda_mma::choose_tile_rows(s.spec.M, s.spec.top_k, s.spec.E), tile) << name;
  }
  EXPECT_EQ(labelled, (std::set<int>{16, 32, 48, 64}));  // the tiles decode alone does not reach
}

// The cuda-mma workspace for M tokens is sized by workspace_align_sizes(M); a smaller batch m
// run in it takes choose_tile_rows(m), which is not monotonic in m (48-row tiles only at 24-36
// rows per expert), and its alignment must still fit.
TEST(CudaMmaScenarios, WorkspaceHoldsEverySmallerBatch) {
  for (const auto& [E, top_k] : {std::pair{8, 2}, std::pair{60, 6}, std::pair{128, 8}}) {
    for (int64_t M = 1; M <= 300; ++M) {
      const AlignSizes sized = cuda_mma::workspace_align_sizes(M, top_k, E);
      for (int64_t m = 1; m <= M; ++m) {
        const AlignSizes s = align_sizes(m * top_k, E, cuda_mma::choose_tile_rows(m, top_k, E));
        ASSERT_LE(s.max_padded_rows, sized.max_padded_rows)
            << "E " << E << " M " << M << " m " << m;
        ASSERT_LE(s.max_tiles, sized.max_tiles) << "E " << E << " M " << M << " m " << m;
        ASSERT_LE(s.workspace_bytes, sized.workspace_bytes)
            << "E " << E << " M " << M << " m " << m;
      }
    }
  }
  // Mixtral's shape: 256 tokens (64 rows per expert) take 32-row tiles, 144 took 48, and a
  // workspace for 256 tokens holds 144 tokens' 48-row padding.
  EXPECT_EQ(cuda_mma::choose_tile_rows(256, 2, 8), 32);
  EXPECT_EQ(cuda_mma::choose_tile_rows(144, 2, 8), 48);
  EXPECT_GE(cuda_mma::workspace_align_sizes(256, 2, 8).max_padded_rows,
            align_sizes(256 * 2, 8, 48).max_padded_rows);
}

// The whole forward (GPU routing included) against the reference routed on the CPU: the GPU
// router selects bit-for-bit the same experts (src/cuda/routing.hpp).
TEST_F(CudaMma, ForwardWithGpuRoutingMatchesReference) {
  const CaseSpec spec{.E = 60,
                      .H = 256,
                      .I = 128,
                      .M = 33,
                      .top_k = 6,
                      .scheme = scheme(4, 128),
                      .act_dtype = DType::bf16,
                      .seed = 7};
  test::MoECase c = test::make_case(spec);
  MoE moe(c.config, *c.experts, "cuda-mma", kGpu);
  OnDevice hidden(c.hidden), logits(c.router_logits);
  OnDevice out = poisoned_output(spec.act_dtype, spec.M, spec.H);
  moe.forward(hidden.view, logits.view, out.view);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_LT(test::relative_error(download(out, spec.act_dtype, spec.M, spec.H), c.reference),
            bound_for(spec.act_dtype));
}

// K splits across warps are reduced in a fixed order: the same input gives the same bits.
TEST_F(CudaMma, RepeatedForwardsAreBitwiseEqual) {
  const CaseSpec spec{.E = 8,
                      .H = 512,
                      .I = 1024,
                      .M = 3,
                      .top_k = 2,
                      .scheme = scheme(4, 128),
                      .act_dtype = DType::bf16,
                      .seed = 11};
  test::MoECase c = test::make_case(spec);
  MoE moe(c.config, *c.experts, "cuda-mma", kGpu);
  OnDevice hidden(c.hidden), weights(c.topk_weights), ids(c.topk_ids);
  OnDevice out = poisoned_output(spec.act_dtype, spec.M, spec.H);
  moe.forward_routed(hidden.view, weights.view, ids.view, out.view);
  const Buffer first = download(out, spec.act_dtype, spec.M, spec.H);
  for (int i = 0; i < 3; ++i) {
    moe.forward_routed(hidden.view, weights.view, ids.view, out.view);
    const Buffer again = download(out, spec.act_dtype, spec.M, spec.H);
    ASSERT_EQ(std::memcmp(first.data(), again.data(), size_t(first.nbytes())), 0) << "run " << i;
  }
}

// A forward captured in a CUDA graph (workspace reserved beforehand) replays correctly.
TEST_F(CudaMma, ForwardIsGraphCapturable) {
  const CaseSpec spec{.E = 128,
                      .H = 256,
                      .I = 128,
                      .M = 5,
                      .top_k = 8,
                      .scheme = scheme(4, 64),
                      .act_dtype = DType::bf16,
                      .seed = 13};
  test::MoECase c = test::make_case(spec);
  const Backend* backend = find_backend("cuda-mma");
  ASSERT_NE(backend, nullptr);
  auto prepared = backend->prepare(*c.experts, c.config, kGpu);
  OnDevice hidden(c.hidden), logits(c.router_logits);
  OnDevice out = poisoned_output(spec.act_dtype, spec.M, spec.H);
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  backend->reserve(*prepared, spec.M, stream);
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), cudaSuccess);
  backend->forward(*prepared, c.config, hidden.view, logits.view, out.view, stream);
  ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  EXPECT_LT(test::relative_error(download(out, spec.act_dtype, spec.M, spec.H), c.reference),
            bound_for(spec.act_dtype));
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
}

// Two host threads, each with its own stream and batch, run forwards on the same prepared
// experts at the same time: every stream has its own workspace, so each result matches its own
// reference, every time.
TEST_F(CudaMma, ConcurrentForwardsOnTwoStreams) {
  test::MoECase c[2] = {test::make_case({.E = 60,
                                         .H = 256,
                                         .I = 128,
                                         .M = 9,
                                         .top_k = 6,
                                         .scheme = scheme(4, 128),
                                         .act_dtype = DType::bf16,
                                         .seed = 21}),
                        test::make_case({.E = 60,
                                         .H = 256,
                                         .I = 128,
                                         .M = 40,
                                         .top_k = 6,
                                         .scheme = scheme(4, 128),
                                         .act_dtype = DType::bf16,
                                         .seed = 21})};
  // Same weights (same seed and shape), different batches.
  const Backend* backend = find_backend("cuda-mma");
  ASSERT_NE(backend, nullptr);
  auto prepared = backend->prepare(*c[0].experts, c[0].config, kGpu);
  double error[2] = {1.0, 1.0};
  auto worker = [&](int i) {
    cudaStream_t stream = nullptr;
    cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
    const int64_t M = c[i].hidden.dim(0);
    OnDevice hidden(c[i].hidden), logits(c[i].router_logits);
    double worst = 0.0;
    for (int round = 0; round < 20; ++round) {
      OnDevice out = poisoned_output(DType::bf16, M, 256);
      backend->forward(*prepared, c[i].config, hidden.view, logits.view, out.view, stream);
      cudaStreamSynchronize(stream);
      worst =
          std::max(worst, test::relative_error(download(out, DType::bf16, M, 256), c[i].reference));
    }
    cudaStreamDestroy(stream);
    error[i] = worst;
  };
  std::thread first(worker, 0), second(worker, 1);
  first.join();
  second.join();
  EXPECT_LT(error[0], bound_for(DType::bf16));
  EXPECT_LT(error[1], bound_for(DType::bf16));
}

// Forwards of three different batches queued back to back on one stream, nothing synchronized in
// between, share one workspace: each kernel may start before the previous one has completed
// (cuda/dependent_launch.cuh), so a kernel that touched memory before waiting would read the other
// batch's alignment or overwrite rows still being read. Every output must match its reference.
TEST_F(CudaMma, BackToBackForwardsOnOneStreamShareTheWorkspace) {
  // One token (8-row tiles, K split across warps), 300 (64-row tiles) and 2100 (4200 pairs: the
  // three-kernel alignment): different alignments, plans and kernel instances. Same seed and
  // shape, so the same weights.
  constexpr int kBatches = 3;
  const int64_t tokens[kBatches] = {1, 300, 2100};
  std::vector<test::MoECase> c;
  for (int64_t M : tokens)
    c.push_back(test::make_case({.E = 8,
                                 .H = 256,
                                 .I = 512,
                                 .M = M,
                                 .top_k = 2,
                                 .scheme = scheme(4, 128),
                                 .act_dtype = DType::bf16,
                                 .seed = 31}));
  const Backend* backend = find_backend("cuda-mma");
  ASSERT_NE(backend, nullptr);
  auto prepared = backend->prepare(*c[0].experts, c[0].config, kGpu);
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  backend->reserve(*prepared, tokens[kBatches - 1], stream);
  std::vector<OnDevice> hidden, logits, outs;
  for (const test::MoECase& one : c) {
    hidden.emplace_back(one.hidden);
    logits.emplace_back(one.router_logits);
  }
  constexpr int kForwards = 9;
  for (int i = 0; i < kForwards; ++i)
    outs.push_back(poisoned_output(DType::bf16, tokens[i % kBatches], 256));
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  for (int i = 0; i < kForwards; ++i) {
    const int b = i % kBatches;
    backend->forward(*prepared, c[b].config, hidden[b].view, logits[b].view, outs[i].view, stream);
  }
  const cudaError_t done = cudaStreamSynchronize(stream);
  cudaStreamDestroy(stream);
  ASSERT_EQ(done, cudaSuccess);
  for (int i = 0; i < kForwards; ++i) {
    const int b = i % kBatches;
    EXPECT_LT(test::relative_error(download(outs[i], DType::bf16, tokens[b], 256), c[b].reference),
              bound_for(DType::bf16))
        << "forward " << i << " (" << tokens[b] << " tokens)";
  }
}

TEST_F(CudaMma, RejectsHostDeviceAndW4a4) {
  test::MoECase c =
      test::make_case({.E = 4, .H = 64, .I = 64, .M = 2, .top_k = 2, .scheme = scheme(4, 32)});
  EXPECT_THROW(MoE(c.config, *c.experts, "cuda-mma", Device{}), Error);
  test::MoECase mx =
      test::make_case({.E = 4,
                       .H = 64,
                       .I = 64,
                       .M = 2,
                       .top_k = 2,
                       .scheme = QuantScheme{.kind = WeightKind::mxfp4,
                                             .group_size = 32,
                                             .activation_quant = ActivationQuant::mxfp4},
                       .activation = Activation::swigluoai});
  EXPECT_THROW(MoE(mx.config, *mx.experts, "cuda-mma", kGpu), Error);  // emulated only
}

TEST_F(CudaMma, RejectsF32Activations) {
  const CaseSpec spec{.E = 4,
                      .H = 64,
                      .I = 64,
                      .M = 2,
                      .top_k = 2,
                      .scheme = scheme(4, 32),
                      .act_dtype = DType::f32};
  test::MoECase c = test::make_case(spec);
  MoE moe(c.config, *c.experts, "cuda-mma", kGpu);
  OnDevice hidden(c.hidden), weights(c.topk_weights), ids(c.topk_ids);
  OnDevice out = poisoned_output(DType::f32, spec.M, spec.H);
  EXPECT_THROW(moe.forward_routed(hidden.view, weights.view, ids.view, out.view), Error);
}

}  // namespace
}  // namespace qmoe
