// Soak: 10^4 random forwards per host backend (QMOE_TEST_SCALE scales the count) against the
// independent float64 reference. Layers are random (support/random_layer.hpp), redrawn every 50
// forwards among those the oracle gives the backend; each forward takes a random window of 0 to 8
// tokens of the layer's case, so M = 0 and M = 1 come up often. Bounds: support/random_layer.hpp.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <random>
#include <string>

#include "qmoe/moe.hpp"
#include "qmoe/oracle.hpp"
#include "support/random_layer.hpp"
#include "support/test_scale.hpp"
#include "support/token_window.hpp"

namespace qmoe {
namespace {

constexpr int64_t kForwardsPerLayer = 50, kTokens = 64;

struct Layer {
  test::CaseSpec spec;
  test::MoECase c;
};

// A random layer the oracle accepts for `backend` on this host, with kTokens tokens of input.
Layer accepted_layer(const std::string& backend, std::mt19937_64& rng) {
  for (;;) {
    test::CaseSpec spec = test::random_spec(rng);
    spec.M = kTokens;
    test::MoECase c = test::make_case(spec);
    c.config.activation_dtype = spec.act_dtype;
    if (!evaluate(describe(*c.experts, c.config), host_cpu(), backend).backend.empty())
      return {spec, std::move(c)};
  }
}

class Soak : public testing::TestWithParam<const char*> {};

TEST_P(Soak, RandomForwardsMatchTheReference) {
  const std::string backend = GetParam();
  const int64_t forwards = test::scaled_count(10000);
  std::mt19937_64 rng(2024);
  int64_t empty = 0, single = 0;
  for (int64_t done = 0; done < forwards;) {
    const Layer layer = accepted_layer(backend, rng);
    const test::MoECase& c = layer.c;
    const MoE moe(c.config, *c.experts, backend);
    const DType dtype = c.hidden.dtype();
    for (int64_t f = 0; f < kForwardsPerLayer && done < forwards; ++f, ++done) {
      const int64_t M = int64_t(rng() % 9), first = int64_t(rng() % (kTokens - M + 1));
      SCOPED_TRACE(fmt::format("forward {}: tokens {}..{} of {}", done, first, first + M,
                               test::describe(layer.spec)));
      Buffer out(dtype, {M, c.config.hidden});
      moe.forward(test::rows_of(c.hidden, first, M), test::rows_of(c.router_logits, first, M),
                  out.view());
      empty += M == 0;
      single += M == 1;
      if (M == 0) continue;
      const double error = test::relative_error(out, test::copy_rows(c.reference, first, M));
      ASSERT_LT(error, test::host_bound_for(dtype));
    }
  }
  EXPECT_GT(empty, 0);
  EXPECT_GT(single, 0);
}

INSTANTIATE_TEST_SUITE_P(HostBackends, Soak, testing::Values("emulation", "cpu"),
                         [](const testing::TestParamInfo<const char*>& p) {
                           return std::string(p.param);
                         });

}  // namespace
}  // namespace qmoe
