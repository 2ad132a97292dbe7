// The oracle and the backends agree: for thousands of random layers (scheme, shape, activation,
// dtype, bias, device, backend), the oracle accepts a backend exactly when that backend's own
// prepare and a forward, called directly, succeed; and what it accepts matches the independent
// float64 reference (bounds of the backend tests, support/random_layer.hpp). CPU backends here,
// and the CUDA backends' host half of prepare (every check before the upload), so that the
// property holds for every backend without a GPU; cuda-mma's upload and forward on a GPU machine
// via tests/cuda_mma. QMOE_TEST_SCALE scales the count.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <utility>
#include <vector>

#include "backend/backend.hpp"
#include "qmoe/error.hpp"
#include "qmoe/moe.hpp"
#include "qmoe/oracle.hpp"
#include "support/moe_case.hpp"
#include "support/random_layer.hpp"
#include "support/test_scale.hpp"

namespace qmoe {
namespace {

struct Draw {
  test::CaseSpec spec;
  bool uneven_groups = false;
  Device device;
  std::string backend;
};

Draw draw(uint64_t seed) {
  std::mt19937_64 rng(seed);
  Draw d;
  d.spec = test::random_spec(rng);
  d.uneven_groups = d.spec.scheme.act_order && rng() % 2 == 0;
  d.device = rng() % 10 == 0 ? Device{DeviceKind::cuda, 0} : Device{};
  d.backend = rng() % 2 == 0 ? "cpu" : "emulation";
  return d;
}

// The case's experts with w13's g_idx redrawn so groups hold unequal channel counts.
test::MoECase with_uneven_groups(test::MoECase c, uint64_t seed) {
  std::mt19937_64 rng(seed ^ 0x9e3779b97f4a7c15ull);
  QuantizedWeight w13 = c.experts->w13().clone();
  int32_t* g_idx = w13.g_idx.data_as<int32_t>();
  for (int64_t i = 0; i < w13.g_idx.numel(); ++i) g_idx[i] = int32_t(rng() % w13.groups());
  return test::make_case(c.config, QuantizedExperts(std::move(w13), c.experts->w2().clone()),
                         c.hidden.dim(0), c.hidden.dtype(), rng);
}

// The draw's case and config, with the activation dtype the oracle is told.
std::pair<test::MoECase, MoEConfig> drawn_case(const Draw& d) {
  test::MoECase c = test::make_case(d.spec);
  if (d.uneven_groups) c = with_uneven_groups(std::move(c), d.spec.seed);
  MoEConfig config = c.config;
  config.activation_dtype = d.spec.act_dtype;
  return {std::move(c), config};
}

TEST(OracleAndPrepare, AgreeOnRandomLayers) {
  const int64_t cases = test::scaled_count(2000);
  int64_t accepted = 0, rejected = 0;
  for (int64_t i = 0; i < cases; ++i) {
    const Draw d = draw(uint64_t(i) + 1);
    SCOPED_TRACE(fmt::format("case {}: {}{} on {} by {}", i, test::describe(d.spec),
                             d.uneven_groups ? " uneven groups" : "", to_string(d.device),
                             d.backend));
    auto [c, config] = drawn_case(d);
    const DeviceDesc device = d.device.kind == DeviceKind::cpu ? host_cpu() : parse_device("h100");
    const Selection verdict = evaluate(describe(*c.experts, config), device, d.backend);
    const bool oracle_accepts = !verdict.backend.empty();

    // The backend on its own: prepare, then one forward on host tensors.
    const Backend* backend = find_backend(d.backend);
    ASSERT_NE(backend, nullptr);
    Buffer out(d.spec.act_dtype, {d.spec.M, d.spec.H});
    std::string refusal;
    try {
      auto prepared = backend->prepare(*c.experts, config, d.device);
      backend->forward(*prepared, config, c.hidden.view(), c.router_logits.view(), out.view(),
                       nullptr);
    } catch (const Error& e) {
      refusal = e.what();
    }
    ASSERT_EQ(oracle_accepts, refusal.empty())
        << "oracle: " << (oracle_accepts ? "accepts" : verdict.error)
        << "\nbackend: " << (refusal.empty() ? "runs" : refusal);
    if (!oracle_accepts) {
      ++rejected;
      continue;
    }
    ++accepted;
    EXPECT_LT(test::relative_error(out, c.reference), test::host_bound_for(d.spec.act_dtype));
    // And through the public API, which asks the same oracle.
    MoE moe(config, *c.experts, d.backend, d.device);
    Buffer api_out(d.spec.act_dtype, {d.spec.M, d.spec.H});
    moe.forward(c.hidden.view(), c.router_logits.view(), api_out.view());
    EXPECT_LT(test::relative_error(api_out, c.reference), test::host_bound_for(d.spec.act_dtype));
  }
  // The draw must exercise both answers, or the property says little (checked where the count
  // is large enough for the shares to be stable).
  if (cases >= 200) {
    EXPECT_GT(accepted, cases / 4);
    EXPECT_GT(rejected, cases / 20);
  }
}

// Half the CUDA draws get a shape at the CUDA kernels' tiling bounds (rows and K multiples of 16
// or 64, groups of 32 or 64), so that each backend accepts often enough, and refuses for its
// tiling rules, for the property to say much.
void near_tiling_bounds(test::CaseSpec& s) {
  std::mt19937_64 rng(s.seed);
  s.H = test::pick<int64_t>(rng, {64, 128, 192});
  s.I = test::pick<int64_t>(rng, {32, 48, 64, 128});
  if (s.scheme.kind == WeightKind::mxfp4) s.I = 64;  // its blocks of 32 must divide I
  if (s.scheme.kind == WeightKind::integer && s.scheme.group_size != kChannelwise)
    s.scheme.group_size = s.I % 64 == 0 ? test::pick(rng, std::vector<int>{32, 64}) : 16;
}

// The CUDA backends, asked for an H100 (sm_90a, where both run): the oracle accepts a layer exactly
// when the host half of the backend's prepare does. Runs in every build with the CUDA backends,
// with or without a GPU.
TEST(OracleAndPrepare, AgreeForCudaBackendsOnTheHost) {
  const int64_t cases = test::scaled_count(1000);
  const DeviceDesc h100 = parse_device("h100");
  int backends = 0;
  for (const char* name : {"cuda-mma", "cuda-wgmma"}) {
    const Backend* backend = find_backend(name);
    if (!backend) continue;  // not in this build
    ++backends;
    int64_t accepted = 0, rejected = 0;
    for (int64_t i = 0; i < cases; ++i) {
      Draw d = draw(uint64_t(i) + 1);
      d.backend = name;
      if (i % 2 == 0) near_tiling_bounds(d.spec);
      SCOPED_TRACE(fmt::format("case {}: {}{} by {}", i, test::describe(d.spec),
                               d.uneven_groups ? " uneven groups" : "", name));
      const auto [c, config] = drawn_case(d);
      const Selection verdict = evaluate(describe(*c.experts, config), h100, name);
      std::string refusal;
      try {
        backend->prepare_on_host(*c.experts, config);
      } catch (const Error& e) {
        refusal = e.what();
      }
      ASSERT_EQ(!verdict.backend.empty(), refusal.empty())
          << "oracle: " << (verdict.backend.empty() ? verdict.error : "accepts")
          << "\nprepare: " << (refusal.empty() ? "accepts" : refusal);
      ++(refusal.empty() ? accepted : rejected);
    }
    if (cases >= 200) {
      EXPECT_GT(accepted, cases / 20) << name;
      EXPECT_GT(rejected, cases / 20) << name;
    }
  }
  if (backends == 0) GTEST_SKIP() << "built without the CUDA backends";
}

}  // namespace
}  // namespace qmoe
