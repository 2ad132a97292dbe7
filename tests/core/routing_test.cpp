// CPU reference routing against the independent float64 router of the test truth
// (src/sample/reference_moe.hpp), over many shapes, with exact ties and grouped top-k.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "qmoe/error.hpp"
#include "route/topk.hpp"
#include "sample/reference_moe.hpp"

namespace qmoe {
namespace {

struct RouteCase {
  const char* name;
  int E, k, n_group, topk_group;
  Scoring scoring;
  bool renormalize, bias, ties;
  float scaling;
};

void PrintTo(const RouteCase& c, std::ostream* os) { *os << c.name; }

class RoutingMatchesDefinition : public testing::TestWithParam<RouteCase> {};

TEST_P(RoutingMatchesDefinition, IdsExactWeightsToFloatRounding) {
  const RouteCase& p = GetParam();
  RoutingConfig c;
  c.scoring = p.scoring;
  c.top_k = p.k;
  c.renormalize = p.renormalize;
  c.n_group = p.n_group;
  c.topk_group = p.topk_group;
  c.routed_scaling_factor = p.scaling;
  std::mt19937_64 rng(static_cast<uint64_t>(p.E * 131 + p.k));
  std::normal_distribution<float> normal(0.0f, 2.0f);
  if (p.bias) {
    c.correction_bias.resize(p.E);
    for (float& b : c.correction_bias) b = 0.1f * normal(rng);
  }
  for (int M : {1, 7, 33}) {
    std::vector<float> logits(static_cast<size_t>(M) * p.E);
    // With ties, logits come from 3 values so many experts score exactly the same.
    for (float& l : logits)
      l = p.ties ? static_cast<float>(static_cast<int>(rng() % 3)) : normal(rng);
    std::vector<float> weights(static_cast<size_t>(M) * p.k);
    std::vector<int32_t> ids(static_cast<size_t>(M) * p.k);
    route_topk(c, logits.data(), M, p.E, weights.data(), ids.data());
    for (int m = 0; m < M; ++m) {
      const sample::ReferenceRouting want =
          sample::reference_route(c, logits.data() + m * p.E, 1, p.E);
      for (int j = 0; j < p.k; ++j) {
        EXPECT_EQ(ids[m * p.k + j], want.ids[j]) << "token " << m << " slot " << j;
        // float softmax/sigmoid and one division: a few ulps of float.
        EXPECT_NEAR(weights[m * p.k + j], want.weights[j], 2e-6 * std::max(1.0, want.weights[j]));
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Cases, RoutingMatchesDefinition,
    testing::Values(
        RouteCase{"mixtral", 8, 2, 0, 0, Scoring::softmax, true, false, false, 1.0f},
        RouteCase{"qwen_no_renorm", 60, 8, 0, 0, Scoring::softmax, false, false, false, 1.0f},
        RouteCase{"top1", 5, 1, 0, 0, Scoring::softmax, false, false, false, 1.0f},
        RouteCase{"ties", 16, 6, 0, 0, Scoring::softmax, true, false, true, 1.0f},
        RouteCase{"sigmoid_bias", 128, 8, 0, 0, Scoring::sigmoid, true, true, false, 1.0f},
        RouteCase{"deepseek_grouped", 256, 8, 8, 4, Scoring::sigmoid, true, true, false, 2.5f},
        RouteCase{"grouped_no_bias_ties", 384, 8, 12, 3, Scoring::softmax, true, false, true, 1.0f},
        RouteCase{"grouped_softmax_scaled", 60, 6, 6, 2, Scoring::softmax, false, false, false,
                  16.0f}),
    [](const testing::TestParamInfo<RouteCase>& p) { return std::string(p.param.name); });

TEST(Routing, BiasSelectsButDoesNotWeigh) {
  RoutingConfig c;
  c.top_k = 1;
  c.renormalize = false;
  c.scoring = Scoring::sigmoid;
  c.correction_bias = {0.0f, 10.0f};
  const float logits[] = {3.0f, 0.0f};
  float weight = 0;
  int32_t id = -1;
  route_topk(c, logits, 1, 2, &weight, &id);
  EXPECT_EQ(id, 1);
  EXPECT_FLOAT_EQ(weight, 0.5f);  // sigmoid(0), unbiased
}

TEST(Routing, RefusesTopKAboveExperts) {
  RoutingConfig c;
  c.top_k = 5;
  const float logits[4] = {1, 2, 3, 4};
  float w[5];
  int32_t ids[5];
  EXPECT_THROW(route_topk(c, logits, 1, 4, w, ids), Error);
}

}  // namespace
}  // namespace qmoe
