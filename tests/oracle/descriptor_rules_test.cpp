// Every rule of every backend descriptor, in both directions: one row per (backend, device, layer)
// saying whether the checks pass or which check fails (a fragment of its reason). Build state is
// left out here (first_failed_check); selection_test covers it.
#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "layers.hpp"
#include "oracle/checks.hpp"
#include "oracle/descriptor.hpp"

namespace qmoe {
namespace {

using test::base_layer;
using test::int_scheme;
using test::with_scheme;

const BackendDescriptor& emulation_rules() { return test::descriptor("emulation"); }
const BackendDescriptor& cpu_rules() { return test::descriptor("cpu"); }
const BackendDescriptor& cuda_mma_rules() { return test::descriptor("cuda-mma"); }
const BackendDescriptor& cuda_wgmma_rules() { return test::descriptor("cuda-wgmma"); }

struct Rule {
  const char* name;
  const BackendDescriptor& (*backend)();
  const char* device;
  std::function<LayerDesc()> layer;
  const char* fails_with;  // nullptr: every check passes
};

void PrintTo(const Rule& r, std::ostream* os) { *os << r.name; }

LayerDesc base() { return base_layer(); }
LayerDesc scheme(const QuantScheme& s) { return with_scheme(base_layer(), s); }
LayerDesc dtype(DType t) {
  LayerDesc l = base_layer();
  l.activation_dtype = t;
  return l;
}
LayerDesc activation(Activation a) {
  LayerDesc l = base_layer();
  l.activation = a;
  return l;
}
LayerDesc biased() {
  LayerDesc l = base_layer();
  l.w13_bias = l.w2_bias = true;
  return l;
}
LayerDesc router_on_input() {
  LayerDesc l = base_layer();
  l.top_k = 1;
  l.apply_router_weight_on_input = true;
  return l;
}
LayerDesc split_act_order() {  // TP 2 shard of an act-order layer: w2 keeps full-K scales
  LayerDesc l = with_scheme(base_layer(), int_scheme(4, 128, false, true));
  l.tp_size = 2;
  l.w2_full_k = l.intermediate;
  l.intermediate /= 2;
  return l;
}
LayerDesc
uneven_act_order() {  // some expert's g_idx puts other than group-size channels in a group
  LayerDesc l = with_scheme(base_layer(), int_scheme(4, 128, false, true));
  l.act_order_uneven_groups = true;
  return l;
}
LayerDesc mxfp4_spread(int spread) {  // block scales 2^spread apart in some 64-channel window
  LayerDesc l = with_scheme(base_layer(), test::mxfp4_scheme());
  l.mxfp4_window_spread = spread;
  return l;
}
LayerDesc shape(int64_t H, int64_t I) {
  LayerDesc l = base_layer();
  l.hidden = H;
  l.intermediate = I;
  return l;
}

class DescriptorRule : public testing::TestWithParam<Rule> {};

TEST_P(DescriptorRule, PassesOrFailsWithItsReason) {
  const Rule& r = GetParam();
  const std::optional<std::string> reason =
      first_failed_check(r.backend(), r.layer(), parse_device(r.device));
  if (!r.fails_with) {
    EXPECT_FALSE(reason.has_value()) << *reason;
  } else {
    ASSERT_TRUE(reason.has_value()) << "expected a failure mentioning '" << r.fails_with << "'";
    EXPECT_NE(reason->find(r.fails_with), std::string::npos) << *reason;
  }
}

constexpr const char* kCpu = "cpu:x86-64,avx2,fma";
constexpr const char* kPass = nullptr;

// clang-format off
INSTANTIATE_TEST_SUITE_P(Emulation, DescriptorRule, testing::Values(
    Rule{"base", emulation_rules, kCpu, base, kPass},
    Rule{"any_cpu_without_x86_features", emulation_rules, "cpu:generic", base, kPass},
    Rule{"not_on_cuda", emulation_rules, "h100", base, "runs on the CPU"},
    Rule{"int8_g64_asym", emulation_rules, kCpu, [] { return scheme(int_scheme(8, 64, true)); }, kPass},
    Rule{"mxfp4", emulation_rules, kCpu, [] { return scheme(test::mxfp4_scheme()); }, kPass},
    Rule{"channelwise", emulation_rules, kCpu, [] { return scheme(int_scheme(4, kChannelwise)); }, kPass},
    Rule{"g256_any_divisor", emulation_rules, kCpu, [] { return scheme(int_scheme(4, 256)); }, kPass},
    Rule{"g24_not_dividing_H", emulation_rules, kCpu, [] { return scheme(int_scheme(8, 24)); }, "group size 24 is not supported"},
    Rule{"act_order", emulation_rules, kCpu, [] { return scheme(int_scheme(4, 128, true, true)); }, kPass},
    Rule{"act_order_split_k", emulation_rules, kCpu, split_act_order, kPass},
    Rule{"relu2_no_mul", emulation_rules, kCpu, [] { return activation(Activation::relu2_no_mul); }, kPass},
    Rule{"f32", emulation_rules, kCpu, [] { return dtype(DType::f32); }, kPass},
    Rule{"bias", emulation_rules, kCpu, biased, kPass},
    Rule{"router_weight_on_input", emulation_rules, kCpu, router_on_input, kPass},
    Rule{"odd_shapes", emulation_rules, kCpu, [] { return with_scheme(shape(2050, 770), int_scheme(4, kChannelwise)); }, kPass}));

INSTANTIATE_TEST_SUITE_P(Cpu, DescriptorRule, testing::Values(
    Rule{"base", cpu_rules, kCpu, base, kPass},
    Rule{"x86_64_without_avx2_uses_portable_code", cpu_rules, "cpu:x86-64", base, kPass},
    Rule{"needs_x86_64", cpu_rules, "cpu:generic", base, "needs a CPU with x86-64"},
    Rule{"not_on_cuda", cpu_rules, "a100", base, "runs on the CPU"},
    Rule{"int8_g128", cpu_rules, kCpu, [] { return scheme(int_scheme(8, 128)); }, kPass},
    Rule{"int4_asym", cpu_rules, kCpu, [] { return scheme(int_scheme(4, 128, true)); }, kPass},
    Rule{"int8_asym_channelwise", cpu_rules, kCpu, [] { return scheme(int_scheme(8, kChannelwise, true)); }, kPass},
    Rule{"g32", cpu_rules, kCpu, [] { return scheme(int_scheme(4, 32)); }, kPass},
    Rule{"g64", cpu_rules, kCpu, [] { return scheme(int_scheme(4, 64)); }, kPass},
    Rule{"g256_divides_K", cpu_rules, kCpu, [] { return scheme(int_scheme(4, 256)); }, kPass},
    Rule{"odd_int4_group", cpu_rules, kCpu, [] { return with_scheme(shape(1536, 768), int_scheme(4, 3)); }, "a group of 3 4-bit codes does not fill whole bytes"},
    Rule{"odd_int8_group", cpu_rules, kCpu, [] { return with_scheme(shape(1536, 768), int_scheme(8, 3)); }, kPass},
    Rule{"mxfp4", cpu_rules, kCpu, [] { return scheme(test::mxfp4_scheme()); }, kPass},
    Rule{"mxfp4_gpt_oss_shape", cpu_rules, kCpu, [] { return with_scheme(shape(2880, 2880), test::mxfp4_scheme()); }, kPass},
    Rule{"act_order", cpu_rules, kCpu, [] { return scheme(int_scheme(4, 128, false, true)); }, kPass},
    Rule{"act_order_split_k", cpu_rules, kCpu, split_act_order, "act-order shard split on K"},
    Rule{"every_activation", cpu_rules, kCpu, [] { return activation(Activation::gelu_tanh_no_mul); }, kPass},
    Rule{"f32", cpu_rules, kCpu, [] { return dtype(DType::f32); }, kPass},
    Rule{"f16", cpu_rules, kCpu, [] { return dtype(DType::f16); }, kPass},
    Rule{"bias", cpu_rules, kCpu, biased, kPass},
    Rule{"router_weight_on_input", cpu_rules, kCpu, router_on_input, kPass}));

INSTANTIATE_TEST_SUITE_P(CudaMma, DescriptorRule, testing::Values(
    Rule{"base_h100", cuda_mma_rules, "h100", base, kPass},
    Rule{"sm_80", cuda_mma_rules, "sm_80", base, kPass},
    Rule{"sm_86", cuda_mma_rules, "a10", base, kPass},
    Rule{"sm_90a", cuda_mma_rules, "sm_90a", base, kPass},
    Rule{"below_sm_80", cuda_mma_rules, "sm_75", base, "needs compute capability sm_80 or newer"},
    Rule{"not_on_cpu", cuda_mma_rules, kCpu, base, "runs on CUDA GPUs"},
    Rule{"int8_g128", cuda_mma_rules, "h100", [] { return scheme(int_scheme(8, 128)); }, kPass},
    Rule{"int4_asym", cuda_mma_rules, "h100", [] { return scheme(int_scheme(4, 128, true)); }, kPass},
    Rule{"g32", cuda_mma_rules, "h100", [] { return scheme(int_scheme(4, 32)); }, kPass},
    Rule{"g64", cuda_mma_rules, "h100", [] { return scheme(int_scheme(4, 64)); }, kPass},
    Rule{"channelwise", cuda_mma_rules, "h100", [] { return scheme(int_scheme(8, kChannelwise)); }, kPass},
    Rule{"g256", cuda_mma_rules, "h100", [] { return scheme(int_scheme(4, 256)); }, kPass},
    Rule{"g16", cuda_mma_rules, "h100", [] { return scheme(int_scheme(4, 16)); }, "group size 16 is not supported (supports channelwise, any multiple of 32 dividing K)"},
    Rule{"g96_not_dividing_H", cuda_mma_rules, "h100", [] { return scheme(int_scheme(4, 96)); }, "group size 96 is not supported"},
    Rule{"mxfp4", cuda_mma_rules, "h100", [] { return scheme(test::mxfp4_scheme()); }, kPass},
    Rule{"mxfp4_gpt_oss_shape_sm_80", cuda_mma_rules, "sm_80", [] { return with_scheme(shape(2880, 2880), test::mxfp4_scheme()); }, kPass},
    Rule{"act_order", cuda_mma_rules, "h100", [] { return scheme(int_scheme(4, 128, true, true)); }, kPass},
    Rule{"act_order_split_k", cuda_mma_rules, "h100", split_act_order, kPass},
    Rule{"relu2_no_mul", cuda_mma_rules, "h100", [] { return activation(Activation::relu2_no_mul); }, kPass},
    Rule{"f16", cuda_mma_rules, "h100", [] { return dtype(DType::f16); }, kPass},
    Rule{"f32", cuda_mma_rules, "h100", [] { return dtype(DType::f32); }, "f32 activations are not supported"},
    Rule{"dtype_not_known_yet", cuda_mma_rules, "h100", [] { LayerDesc l = base(); l.activation_dtype.reset(); return l; }, kPass},
    Rule{"bias", cuda_mma_rules, "h100", biased, kPass},
    Rule{"router_weight_on_input", cuda_mma_rules, "h100", router_on_input, kPass},
    Rule{"expert_gemm_beyond_32_bit_offsets", cuda_mma_rules, "h100", [] { return shape(32768, 32768); }, kPass},
    Rule{"odd_shapes_are_padded", cuda_mma_rules, "h100", [] { return with_scheme(shape(2000, 200), int_scheme(4, kChannelwise)); }, kPass}));

INSTANTIATE_TEST_SUITE_P(CudaWgmma, DescriptorRule, testing::Values(
    Rule{"base_h200", cuda_wgmma_rules, "h200", base, kPass},
    Rule{"sm_90a_only", cuda_wgmma_rules, "a100", base, "needs compute capability sm_90; "},
    Rule{"not_on_blackwell", cuda_wgmma_rules, "b200", base, "needs compute capability sm_90; "},
    Rule{"int8_asym", cuda_wgmma_rules, "h100", [] { return scheme(int_scheme(8, 64, true)); }, kPass},
    Rule{"g32", cuda_wgmma_rules, "h100", [] { return scheme(int_scheme(4, 32)); }, "group size 32 is not supported"},
    Rule{"act_order", cuda_wgmma_rules, "h100", [] { return scheme(int_scheme(4, 128, true, true)); }, kPass},
    Rule{"act_order_uneven_groups", cuda_wgmma_rules, "h100", uneven_act_order, "act-order groups of unequal size"},
    Rule{"act_order_split_k", cuda_wgmma_rules, "h100", split_act_order, "act-order shard split on K"},
    Rule{"bias", cuda_wgmma_rules, "h100", biased, kPass},
    Rule{"mxfp4", cuda_wgmma_rules, "h200", [] { return scheme(test::mxfp4_scheme()); }, kPass},
    Rule{"mxfp4_gpt_oss_shape", cuda_wgmma_rules, "h200", [] { return with_scheme(shape(2880, 2880), test::mxfp4_scheme()); }, kPass},
    Rule{"mxfp4_spread_at_limit", cuda_wgmma_rules, "h200", [] { return mxfp4_spread(14); }, kPass},
    Rule{"mxfp4_spread_beyond_limit", cuda_wgmma_rules, "h200", [] { return mxfp4_spread(15); }, "differ by a factor 2^15; the kernel re-codes each window at one scale, exactly up to 2^14"},
    Rule{"w4a4", cuda_wgmma_rules, "h200", [] { QuantScheme s = test::mxfp4_scheme(); s.activation_quant = ActivationQuant::mxfp4; return scheme(s); }, "MXFP4 activations (W4A4) are emulated only"},
    Rule{"mxfp4_spread_is_cuda_wgmma_only", cuda_mma_rules, "h200", [] { return mxfp4_spread(40); }, kPass},
    Rule{"router_weight_on_input", cuda_wgmma_rules, "h100", router_on_input, kPass},
    Rule{"f32", cuda_wgmma_rules, "h100", [] { return dtype(DType::f32); }, "f32 activations"},
    Rule{"w13_rows_off_tile", cuda_wgmma_rules, "h100", [] { return with_scheme(shape(2048, 804), int_scheme(4, kChannelwise)); }, "w13 is [N=1608, K=2048]: N must be a multiple of 16"},
    Rule{"expert_gemm_at_32_bit_offsets", cuda_wgmma_rules, "h100", [] { return shape(32768, 32640); }, kPass},
    Rule{"expert_gemm_beyond_32_bit_offsets", cuda_wgmma_rules, "h100", [] { return shape(32768, 32768); }, "w13 is [N=65536, K=32768]: 2147483648 weights per expert exceed its limit of 2147483647"},
    Rule{"k_off_tile", cuda_wgmma_rules, "h100", [] { return with_scheme(shape(2048, 800), int_scheme(4, kChannelwise)); }, "w2 is [N=2048, K=800]: K must be a multiple of 64"}));
// clang-format on

// The group-size rules that no shipped descriptor trips today, on descriptors of their own.
TEST(DescriptorRuleSynthetic, GroupMustCoverWholeKTiles) {
  BackendDescriptor d = cuda_mma_rules();
  d.group_sizes = {kChannelwise, kAnyGroupDividingK};
  d.group_multiple = 1;
  d.k_multiple = 64;
  d.group_multiple_of_k_tile = true;
  const DeviceDesc h100 = parse_device("h100");
  EXPECT_FALSE(first_failed_check(d, with_scheme(base_layer(), int_scheme(4, 128)), h100));
  const auto reason = first_failed_check(d, with_scheme(base_layer(), int_scheme(4, 32)), h100);
  ASSERT_TRUE(reason);
  EXPECT_NE(reason->find("group size 32 must be a multiple of the K tile (64)"), std::string::npos)
      << *reason;
}

TEST(DescriptorRuleSynthetic, ExpertAndTopKLimits) {
  BackendDescriptor d = cpu_rules();
  d.max_experts = 64;
  d.max_top_k = 4;
  const DeviceDesc cpu = parse_device(kCpu);
  LayerDesc l = base_layer();
  l.num_experts = 64;
  l.top_k = 4;
  EXPECT_FALSE(first_failed_check(d, l, cpu));
  l.num_experts = 65;
  EXPECT_NE(first_failed_check(d, l, cpu).value_or("").find("65 experts exceed its limit of 64"),
            std::string::npos);
  l.num_experts = 64;
  l.top_k = 5;
  EXPECT_NE(first_failed_check(d, l, cpu).value_or("").find("top-k 5 exceeds its limit of 4"),
            std::string::npos);
}

TEST(DescriptorRuleSynthetic, DifferentSchemesAreNamedPerWeight) {
  LayerDesc l = base_layer();
  l.w2_scheme = int_scheme(4, 16);
  const auto reason = first_failed_check(cuda_mma_rules(), l, parse_device("h100"));
  ASSERT_TRUE(reason);
  EXPECT_EQ(reason->rfind("w2: group size 16", 0), 0u) << *reason;
}

// Upstream #14: each backend's group-size set is declared and exercised for 32/64/128/-1.
TEST(DescriptorRuleSynthetic, EveryBackendDeclaresTheCommonGroupSizes) {
  for (const BackendDescriptor* d : all_descriptors()) {
    const DeviceDesc device = parse_device(d->device == DeviceKind::cpu ? kCpu : "h100");
    for (int g : {32, 64, 128, kChannelwise}) {
      const auto reason =
          first_failed_check(*d, with_scheme(base_layer(), int_scheme(4, g)), device);
      const bool declared =
          std::find(d->group_sizes.begin(), d->group_sizes.end(), g) != d->group_sizes.end() ||
          (g != kChannelwise && g % d->group_multiple == 0 &&
           std::find(d->group_sizes.begin(), d->group_sizes.end(), kAnyGroupDividingK) !=
               d->group_sizes.end());
      const bool group_rejected = reason && reason->find("group size") != std::string::npos;
      EXPECT_EQ(declared, !group_rejected) << d->name << " g" << g << ": " << reason.value_or("");
    }
  }
}

}  // namespace
}  // namespace qmoe
