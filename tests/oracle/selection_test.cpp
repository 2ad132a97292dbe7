// Selection: priority order, preferences, errors, the build state from the registry, and the
// upstream dispatch regressions as named cases. Synthetic descriptors (select_among) stand in
// where the shipped table has only one backend per platform.
#include <gtest/gtest.h>

#include <algorithm>

#include <set>

#include "backend/backend.hpp"
#include "layers.hpp"
#include "oracle/descriptor.hpp"
#include "oracle/forward_cost.hpp"
#include "oracle/priority.hpp"
#include "oracle/select.hpp"
#include "sample/random_moe.hpp"
#include "support/expect_error.hpp"

namespace qmoe {
namespace {

using test::base_layer;
using test::expect_error;
using test::int_scheme;
using test::with_scheme;

const DeviceDesc& x86() {
  static const DeviceDesc d = parse_device("cpu:x86-64,avx2,fma");
  return d;
}

std::optional<std::string> everything_built(const BackendDescriptor&, const DeviceDesc&) {
  return std::nullopt;
}

const Verdict& verdict_of(const Selection& s, std::string_view backend) {
  for (const Verdict& v : s.verdicts)
    if (v.backend == backend) return v;
  throw Error("no verdict for " + std::string(backend));
}

// Two backends on the CPU platform: `first` has priority over `second`.
struct Pair {
  BackendDescriptor first = test::descriptor("cpu");
  BackendDescriptor second = test::descriptor("cpu");
  Pair() {
    first.name = "first";
    second.name = "second";
  }
  Selection select(const LayerDesc& l, std::string_view preference = "auto") const {
    return select_among({&first, &second}, l, x86(), preference, everything_built);
  }
};

TEST(Selection, AutoOnX86PicksTheCpuBackendWhenBuilt) {
  if (!find_backend("cpu")) GTEST_SKIP() << "the cpu backend is not registered in this build";
  const Selection s = select(base_layer(), x86());
  EXPECT_EQ(s.backend, "cpu");
  EXPECT_TRUE(s.verdicts.front().chosen);
  EXPECT_EQ(s.verdicts.front().backend, "cpu");
}

TEST(Selection, EveryKnownBackendGetsExactlyOneVerdict) {
  for (const char* device : {"cpu:x86-64,avx2,fma", "h100"}) {
    const Selection s = evaluate(base_layer(), parse_device(device));
    std::multiset<std::string> seen;
    for (const Verdict& v : s.verdicts) {
      seen.insert(v.backend);
      EXPECT_EQ(v.chosen, v.reason.empty()) << v.backend << ": " << v.reason;
    }
    const std::vector<std::string> known = known_backends();
    EXPECT_EQ(seen, std::multiset<std::string>(known.begin(), known.end()));
  }
}

TEST(Selection, BuiltStateComesFromTheRegistry) {
  const Selection s = evaluate(base_layer(), parse_device("h100"));
  for (const Verdict& v : s.verdicts) {
    const bool said_not_built = v.reason.find("not built into this qmoe") != std::string::npos;
    EXPECT_EQ(said_not_built, find_backend(v.backend) == nullptr) << v.reason;
  }
}

TEST(Selection, UnbuiltBackendIsRejectedWithTheBuildHint) {
  Pair p;
  const auto cpu_not_built = [](const BackendDescriptor& d,
                                const DeviceDesc&) -> std::optional<std::string> {
    if (d.name == "first") return "not built into this qmoe (its sources are not in this build)";
    return std::nullopt;
  };
  const Selection s =
      select_among({&p.first, &p.second}, base_layer(), x86(), "auto", cpu_not_built);
  EXPECT_EQ(s.backend, "second");
  EXPECT_EQ(verdict_of(s, "first").reason,
            "not built into this qmoe (its sources are not in this build)");
}

TEST(Selection, AutoOnSm90PlansCudaMmaThenWgmmaFromItsCrossover) {
  const LayerDesc l = base_layer();
  const Selection s = select_among(descriptors_for(DeviceKind::cuda), l, parse_device("h100"),
                                   "auto", everything_built);
  EXPECT_EQ(s.backend, "cuda-mma");
  ASSERT_EQ(s.plan.size(), 2u);
  EXPECT_EQ(s.plan[0].backend, "cuda-mma");
  EXPECT_EQ(s.plan[0].from_tokens, 1);
  EXPECT_EQ(s.plan[1].backend, "cuda-wgmma");
  // from where cuda-wgmma's cost model is faster than cuda-mma's for good
  EXPECT_EQ(s.plan[1].from_tokens, modelled_crossover_tokens(test::descriptor("cuda-mma"),
                                                             test::descriptor("cuda-wgmma"), l));
  EXPECT_GT(s.plan[1].from_tokens, 1);
  EXPECT_NE(verdict_of(s, "cuda-wgmma").reason.find("(the plan)"), std::string::npos);
}

TEST(Selection, NoPlanForANamedBackendOrALayerTheLargeBatchBackendCannotRun) {
  const DeviceDesc h100 = parse_device("h100");
  const auto order = descriptors_for(DeviceKind::cuda);
  EXPECT_TRUE(select_among(order, base_layer(), h100, "cuda-mma", everything_built).plan.empty());
  // act-order groups of unequal size: cuda-mma runs them, cuda-wgmma does not
  LayerDesc uneven = with_scheme(base_layer(), int_scheme(4, 128, false, true));
  uneven.act_order_uneven_groups = true;
  const Selection s = select_among(order, uneven, h100, "auto", everything_built);
  EXPECT_EQ(s.backend, "cuda-mma");
  EXPECT_TRUE(s.plan.empty());
  EXPECT_TRUE(select_among(order, base_layer(), parse_device("a100"), "auto", everything_built)
                  .plan.empty());
}

// A layer of a few hundred channels: cuda-wgmma runs it, but its fixed costs never pay there, so
// its cost model stays behind cuda-mma's at every size and "auto" plans it nowhere.
TEST(Selection, NoPlanWhereTheLargeBatchModelNeverOvertakes) {
  LayerDesc small = base_layer();
  small.num_experts = 8;
  small.hidden = 256;
  small.intermediate = 128;
  small.top_k = 2;
  const Selection s = select_among(descriptors_for(DeviceKind::cuda), small, parse_device("h100"),
                                   "auto", everything_built);
  EXPECT_EQ(s.backend, "cuda-mma");
  EXPECT_TRUE(s.plan.empty());
  EXPECT_TRUE(verdict_of(s, "cuda-wgmma").compatible);
  EXPECT_NE(verdict_of(s, "cuda-wgmma")
                .reason.find("its cost model does not stay faster than 'cuda-mma'"),
            std::string::npos)
      << verdict_of(s, "cuda-wgmma").reason;
}

// A layer whose forwards take the batched-experts format: cuda-wgmma does not take it, so on an
// H100 cuda-mma runs every batch (no plan), cuda-wgmma's verdict says why, asking for it by name is
// an Error naming the backends that would, and each verdict lists the formats its backend takes.
TEST(Selection, BatchedExpertsFormatRejectsBackendsWithoutIt) {
  const DeviceDesc h100 = parse_device("h100");
  const auto order = descriptors_for(DeviceKind::cuda);
  LayerDesc batched = base_layer();
  batched.activation_format = ActivationFormat::batched_experts;
  const Selection s = select_among(order, batched, h100, "auto", everything_built);
  EXPECT_EQ(s.backend, "cuda-mma");
  EXPECT_TRUE(s.plan.empty());
  EXPECT_NE(verdict_of(s, "cuda-wgmma")
                .reason.find("does not take the batched_experts activation format (takes "
                             "standard)"),
            std::string::npos)
      << verdict_of(s, "cuda-wgmma").reason;
  EXPECT_EQ(verdict_of(s, "cuda-wgmma").activation_formats,
            std::vector<ActivationFormat>{ActivationFormat::standard});
  EXPECT_EQ(verdict_of(s, "cuda-mma").activation_formats,
            (std::vector<ActivationFormat>{ActivationFormat::standard,
                                           ActivationFormat::batched_experts}));
  expect_error([&] { select_among(order, batched, h100, "cuda-wgmma", everything_built); },
               "Backends that would: cuda-mma");
  // The standard format keeps the plan.
  EXPECT_EQ(select_among(order, base_layer(), h100, "auto", everything_built).plan.size(), 2u);
}

// From the weights themselves: cuda-wgmma takes an act-order layer whose groups are all group-size
// long on an H100; one expert's w2 with a channel moved between groups (describe notices) keeps
// cuda-mma alone, and cuda-wgmma's verdict says why.
TEST(Selection, ActOrderTakesCudaWgmmaOnlyWithEqualGroups) {
  const DeviceDesc h100 = parse_device("h100");
  const auto order = descriptors_for(DeviceKind::cuda);
  sample::MoECase c = sample::make_case({.E = 4,
                                         .H = 256,
                                         .I = 128,
                                         .M = 1,
                                         .top_k = 2,
                                         .scheme = int_scheme(4, 64, false, true),
                                         .act_dtype = DType::bf16});
  c.config.activation_dtype = DType::bf16;
  const Selection even =
      select_among(order, describe(*c.experts, c.config), h100, "auto", everything_built);
  EXPECT_EQ(even.backend, "cuda-mma");
  // compatible (a layer this small gets no plan: cuda-wgmma's cost model never overtakes)
  EXPECT_TRUE(verdict_of(even, "cuda-wgmma").compatible) << verdict_of(even, "cuda-wgmma").reason;

  QuantizedWeight w2 = c.experts->w2().clone();
  int32_t* g_idx = w2.g_idx.data_as<int32_t>() + 3 * w2.K;
  *std::find(g_idx, g_idx + w2.K, 1) = 0;
  const QuantizedExperts uneven(c.experts->w13().clone(), std::move(w2));
  const Selection s =
      select_among(order, describe(uneven, c.config), h100, "auto", everything_built);
  EXPECT_EQ(s.backend, "cuda-mma");
  EXPECT_TRUE(s.plan.empty());
  EXPECT_FALSE(verdict_of(s, "cuda-wgmma").compatible);
  EXPECT_NE(verdict_of(s, "cuda-wgmma").reason.find("act-order groups of unequal size"),
            std::string::npos)
      << verdict_of(s, "cuda-wgmma").reason;
}

// MXFP4 from the weights: cuda-wgmma takes random gpt-oss-like experts on an H100; one w2 row
// whose two 32-blocks of a 64-channel window are 2^15 apart (more than cuda-wgmma's e4m3 re-coding
// holds exactly) keeps cuda-mma alone, and cuda-wgmma's verdict says why.
TEST(Selection, Mxfp4TakesCudaWgmmaOnlyWhileWindowsShareAScaleExactly) {
  const DeviceDesc h100 = parse_device("h100");
  const auto order = descriptors_for(DeviceKind::cuda);
  sample::MoECase c = sample::make_case({.E = 4,
                                         .H = 256,
                                         .I = 128,
                                         .M = 1,
                                         .top_k = 2,
                                         .scheme = test::mxfp4_scheme(),
                                         .activation = Activation::swigluoai,
                                         .bias = true,
                                         .act_dtype = DType::bf16});
  c.config.activation_dtype = DType::bf16;
  const Selection even =
      select_among(order, describe(*c.experts, c.config), h100, "auto", everything_built);
  EXPECT_TRUE(verdict_of(even, "cuda-wgmma").compatible) << verdict_of(even, "cuda-wgmma").reason;

  QuantizedWeight w2 = c.experts->w2().clone();
  uint8_t* scales = w2.scales.data_as<uint8_t>() + 5 * (w2.K / 32);  // row 5 of expert 0
  scales[0] = uint8_t(scales[1] + 15);
  const QuantizedExperts spread(c.experts->w13().clone(), std::move(w2));
  const Selection s =
      select_among(order, describe(spread, c.config), h100, "auto", everything_built);
  EXPECT_EQ(s.backend, "cuda-mma");
  EXPECT_TRUE(s.plan.empty());
  EXPECT_NE(verdict_of(s, "cuda-wgmma").reason.find("differ by a factor 2^15"), std::string::npos)
      << verdict_of(s, "cuda-wgmma").reason;
}

TEST(Selection, LowerPriorityCompatibleBackendsSaySo) {
  const Selection s = Pair().select(base_layer());
  EXPECT_EQ(s.backend, "first");
  EXPECT_TRUE(verdict_of(s, "second").compatible);
  EXPECT_NE(verdict_of(s, "second").reason.find("'first' comes first in the CPU priority order"),
            std::string::npos);
}

TEST(Selection, NamedBackendIsHonouredOverPriority) {  // upstream #49065
  const Selection s = Pair().select(base_layer(), "second");
  EXPECT_EQ(s.backend, "second");
  EXPECT_NE(verdict_of(s, "first").reason.find("'second' was asked for"), std::string::npos);
}

TEST(Selection, UnknownBackendNameListsTheKnownOnes) {
  expect_error([] { select(base_layer(), x86(), "marlin"); },
               "unknown backend 'marlin' (known: cpu, emulation, cuda-mma, cuda-wgmma, or auto)");
}

TEST(Selection, InvalidLayerIsAnErrorBeforeAnyBackend) {
  LayerDesc l = base_layer();
  l.w2_scheme = int_scheme(4, 100);
  expect_error([&] { select(l, x86()); }, "w2: group size 100 does not divide K = 768");
  l = base_layer();
  l.top_k = 0;
  expect_error([&] { select(l, x86()); }, "top-k 0 must be in 1..128");
}

// --- upstream regressions: bugs the upstream oracle shipped, one test each ---

TEST(UpstreamRegression, Int8WithGroupsIsAccepted) {  // #10
  const LayerDesc l = with_scheme(base_layer(), int_scheme(8, 128));
  if (find_backend("cpu")) {
    EXPECT_EQ(select(l, x86()).backend, "cpu");
  }
  for (const BackendDescriptor* d : {&test::descriptor("cpu"), &test::descriptor("cuda-mma")}) {
    const DeviceDesc device = parse_device(d->device == DeviceKind::cpu ? "cpu" : "h100");
    EXPECT_EQ(select_among({d}, l, device, "auto", everything_built).backend, d->name);
  }
}

TEST(UpstreamRegression, AsymmetricInt4ReachesABackendWithZeroPoints) {  // #9
  Pair p;
  p.first.zero_points = false;
  const Selection s = p.select(with_scheme(base_layer(), int_scheme(4, 128, true)));
  EXPECT_EQ(s.backend, "second");
  EXPECT_NE(verdict_of(s, "first").reason.find("zero points"), std::string::npos);
  if (find_backend("cpu")) {
    EXPECT_EQ(select(with_scheme(base_layer(), int_scheme(4, 32, true)), x86()).backend, "cpu");
  }
}

TEST(UpstreamRegression, BiasNeverGoesToABackendWithoutBias) {  // #20, triton had no bias
  Pair p;
  p.first.bias = false;
  LayerDesc l = base_layer();
  l.w2_bias = true;
  const Selection s = p.select(l);
  EXPECT_EQ(s.backend, "second");
  EXPECT_EQ(verdict_of(s, "first").reason, "expert bias (w2) is not supported");
  p.second.bias = false;
  expect_error([&] { p.select(l); }, "no backend can run this layer");
  expect_error([&] { p.select(l, "first"); }, "expert bias (w2) is not supported");
}

TEST(UpstreamRegression, TileConstraintFallsThroughToTheNextBackend) {
  Pair p;
  p.first.n_multiple = 64;
  LayerDesc l = base_layer();
  l.intermediate = 200;  // w13 rows 400: not a multiple of 64
  l.w13_scheme = l.w2_scheme = int_scheme(4, kChannelwise);
  const Selection s = p.select(l);
  EXPECT_EQ(s.backend, "second");
  EXPECT_EQ(verdict_of(s, "first").reason,
            "w13 is [N=400, K=2048]: N must be a multiple of 64 (tile)");
}

TEST(UpstreamRegression, GroupSizeComesFromTheSchemeNotTheScaleType) {  // #7, PR #44570
  // The stored scale dtype must not change any verdict, and g16 / g8 are refused by a backend
  // needing multiples of 32 whatever the scales were stored as (g256 is fine there).
  for (int group : {256, 16, 8, 128}) {
    std::vector<std::string> reasons;
    for (DType stored : {DType::f16, DType::bf16, DType::f32}) {
      QuantScheme s = int_scheme(4, group);
      s.source_scale_dtype = stored;
      const Selection sel =
          evaluate_among({&test::descriptor("cuda-mma")}, with_scheme(base_layer(), s),
                         parse_device("h100"), "auto", everything_built);
      reasons.push_back(verdict_of(sel, "cuda-mma").reason);
    }
    EXPECT_EQ(reasons[0], reasons[1]);
    EXPECT_EQ(reasons[0], reasons[2]);
    const bool refused = reasons[0].find("group size") != std::string::npos;
    EXPECT_EQ(refused, group < 32) << reasons[0];
  }
}

TEST(UpstreamRegression, IncompatiblePreferenceIsAnErrorNotAFallback) {  // #18, #19
  const LayerDesc odd = test::emulation_only_layer();
  expect_error([&] { select(odd, x86(), "cpu"); }, "backend 'cpu' cannot run this layer");
  expect_error([&] { select(odd, x86(), "cpu"); }, "does not fill whole bytes");
  expect_error([&] { select(odd, x86(), "cpu"); }, "Backends that would: emulation");
  expect_error([&] { select(base_layer(), x86(), "cuda-mma"); }, "runs on CUDA GPUs");
}

TEST(UpstreamRegression, EmulationIsNeverChosenByAuto) {  // #19, PR #41436
  // Where nothing else runs the layer, auto is an error that points at emulation, never a silent
  // slow fallback.
  const LayerDesc odd = test::emulation_only_layer();
  expect_error([&] { select(odd, x86()); }, "ask for backend 'emulation' explicitly");
  expect_error([&] { select(base_layer(), parse_device("cpu:generic")); },
               "cpu: needs a CPU with x86-64");
  EXPECT_EQ(select(odd, x86(), "emulation").backend, "emulation");
  // Even with emulation first in the order and compatible, auto skips it.
  const Selection s = select_among({&test::descriptor("emulation"), &test::descriptor("cpu")},
                                   base_layer(), x86(), "auto", everything_built);
  EXPECT_EQ(s.backend, "cpu");
  EXPECT_NE(verdict_of(s, "emulation").reason.find("only when asked for by name"),
            std::string::npos);
}

TEST(Selection, W4A4IsEmulatedOnlyAndAutoSaysHowToAskForIt) {
  // Either activation scale rule: the OCP floor one and Quark's even one.
  for (const ActivationQuant rule : {ActivationQuant::mxfp4, ActivationQuant::mxfp4_even}) {
    QuantScheme w4a4 = test::mxfp4_scheme();
    w4a4.activation_quant = rule;
    const LayerDesc l = with_scheme(base_layer(), w4a4);
    for (const DeviceDesc& device : {x86(), parse_device("h100")}) {
      const Selection s = evaluate(l, device, "auto");
      EXPECT_TRUE(s.backend.empty()) << device.name << ", " << to_string(w4a4);
      for (const Verdict& v : s.verdicts) {
        const bool other_platform = v.reason.rfind("runs on", 0) == 0;
        if (v.backend == "emulation" || other_platform) continue;
        EXPECT_NE(v.reason.find("weights: MXFP4 activations (W4A4) are emulated only"),
                  std::string::npos)
            << v.backend << " on " << device.name << ", " << to_string(w4a4) << ": " << v.reason;
      }
    }
    expect_error([&] { select(l, x86()); }, "--backend emulation");
    EXPECT_EQ(select(l, x86(), "emulation").backend, "emulation");
  }
  // The same weights without activation quantization stay with the fast backends' own rules.
  EXPECT_EQ(
      verdict_of(evaluate(with_scheme(base_layer(), test::mxfp4_scheme()), x86(), "auto"), "cpu")
          .reason.find("W4A4"),
      std::string::npos);
}

TEST(UpstreamRegression, NoBackendSaysWhatToChange) {
  const LayerDesc l = test::emulation_only_layer();
  expect_error([&] { select(l, parse_device("sm_75")); }, "cuda-mma: needs compute capability");
  expect_error([&] { select(l, parse_device("h100")); }, "cuda-wgmma: weights: group size 3");
}

TEST(UpstreamRegression, EveryWrittenBackendIsReachable) {  // #8: a dispatch path nobody reached
  // With everything built, the base layer on each backend's platform reaches it: by priority, as
  // the plan's large-batch step, or by name for the opt-in reference.
  for (const BackendDescriptor* d : all_descriptors()) {
    const DeviceDesc device = parse_device(d->device == DeviceKind::cpu ? "cpu:x86-64" : "h100");
    const Selection s = select_among(descriptors_for(d->device), base_layer(), device,
                                     d->opt_in_only ? d->name : "auto", everything_built);
    const bool planned = std::any_of(s.plan.begin(), s.plan.end(),
                                     [&](const PlanStep& p) { return p.backend == d->name; });
    EXPECT_TRUE(s.backend == d->name || planned) << d->name;
  }
}

TEST(UpstreamRegression, PlatformChecksComeFromDescriptorsNotCudaNumbers) {  // #27
  // A CPU has no compute capability; CUDA backends must say "CUDA GPUs", not compare numbers.
  const Selection s = select(base_layer(), x86(), "emulation");
  EXPECT_NE(verdict_of(s, "cuda-mma").reason.find("runs on CUDA GPUs"), std::string::npos);
}

}  // namespace
}  // namespace qmoe
