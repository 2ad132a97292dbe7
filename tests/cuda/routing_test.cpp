// GPU top-k routing against the CPU reference (src/route/topk.hpp).
#include <cmath>
#include <random>
#include <vector>

#include "core/check.hpp"
#include "cuda/routing.hpp"
#include "gpu_test.hpp"
#include "route/topk.hpp"

namespace qmoe::test {
namespace {

enum class Logits { continuous, quantized };

struct RoutingCase {
  int64_t M, E;
  int k;
  Scoring scoring = Scoring::softmax;
  bool bias = false;
  int n_group = 0, topk_group = 0;
  bool renormalize = true;
  float scaling = 1.0f;
  Logits logits = Logits::continuous;
};

// Selection score of expert e in double, to judge whether two experts are a near tie.
double selection_score(const RoutingConfig& c, const float* row, int64_t E, int64_t e) {
  double s;
  if (c.scoring == Scoring::sigmoid) {
    s = 1.0 / (1.0 + std::exp(-double(row[e])));
  } else {
    double peak = row[0], sum = 0.0;
    for (int64_t i = 0; i < E; ++i) peak = std::max(peak, double(row[i]));
    for (int64_t i = 0; i < E; ++i) sum += std::exp(row[i] - peak);
    s = std::exp(row[e] - peak) / sum;
  }
  return s + (c.correction_bias.empty() ? 0.0 : c.correction_bias[e]);
}

void run_case(const RoutingCase& rc, uint64_t seed) {
  SCOPED_TRACE(::testing::Message() << "M " << rc.M << " E " << rc.E << " k " << rc.k << " sigmoid "
                                    << (rc.scoring == Scoring::sigmoid) << " bias " << rc.bias
                                    << " groups " << rc.n_group << "/" << rc.topk_group
                                    << " quantized " << (rc.logits == Logits::quantized));
  std::mt19937_64 rng(seed);
  RoutingConfig config;
  config.scoring = rc.scoring;
  config.top_k = rc.k;
  config.renormalize = rc.renormalize;
  config.routed_scaling_factor = rc.scaling;
  config.n_group = rc.n_group;
  config.topk_group = rc.topk_group;
  // Quantized logits (and bias) come from a coarse grid: many exact ties, which the GPU must
  // break exactly as the CPU does (lower id first), and no near ties that rounding could flip.
  std::normal_distribution<float> normal(0.0f, 2.0f);
  std::uniform_int_distribution<int> grid(-8, 8);
  const bool quantized = rc.logits == Logits::quantized;
  if (rc.bias)
    for (int64_t e = 0; e < rc.E; ++e)
      config.correction_bias.push_back(quantized ? static_cast<float>(grid(rng)) / 64.0f
                                                 : normal(rng) * 0.05f);
  std::vector<float> logits(rc.M * rc.E);
  for (float& x : logits) x = quantized ? static_cast<float>(grid(rng)) / 4.0f : normal(rng);

  std::vector<float> cpu_w(rc.M * rc.k);
  std::vector<int32_t> cpu_ids(rc.M * rc.k);
  route_topk(config, logits.data(), rc.M, rc.E, cpu_w.data(), cpu_ids.data());

  DeviceBuffer logits_d = to_device(logits), bias_d = to_device(config.correction_bias);
  DeviceBuffer w_d = poisoned(cpu_w.size() * sizeof(float));
  DeviceBuffer ids_d = poisoned(cpu_ids.size() * sizeof(int32_t));
  const RoutingParams params = routing_params(config, bias_d.as<float>());
  validate_routing(params, rc.E);
  QMOE_CUDA_CHECK(route_topk_cuda(params, logits_d.as<float>(), rc.E, rc.M, rc.E, w_d.as<float>(),
                                  ids_d.as<int32_t>(), nullptr));
  const auto gpu_w = to_host<float>(w_d, cpu_w.size());
  const auto gpu_ids = to_host<int32_t>(ids_d, cpu_ids.size());

  // Weights: the GPU sums the softmax denominator as a tree, the CPU as a loop; expf may differ
  // by 2 ulp. Both stay within ~sqrt(E) * 2^-24 relative, far inside 1e-5.
  int64_t near_tie_rows = 0, bad_rows = 0;
  for (int64_t m = 0; m < rc.M; ++m) {
    bool same_ids = true;
    for (int j = 0; j < rc.k; ++j) same_ids &= gpu_ids[m * rc.k + j] == cpu_ids[m * rc.k + j];
    if (same_ids) {
      for (int j = 0; j < rc.k; ++j) {
        const float c = cpu_w[m * rc.k + j], g = gpu_w[m * rc.k + j];
        if (!(std::fabs(g - c) <= 1e-5f * std::fabs(c) + 1e-30f) && bad_rows++ < 5)
          ADD_FAILURE() << "row " << m << " slot " << j << ": weight " << g << " vs CPU " << c;
      }
      continue;
    }
    // A differing id is acceptable only for continuous logits without grouping, and only
    // between two experts whose selection scores agree to 1e-6 relative (a tie within fp32
    // rounding).
    bool explained = !quantized && rc.n_group == 0;
    for (int j = 0; j < rc.k && explained; ++j) {
      const int32_t a = cpu_ids[m * rc.k + j], b = gpu_ids[m * rc.k + j];
      if (a == b) continue;
      if (b < 0 || b >= rc.E) {
        explained = false;
        break;
      }
      const double sa = selection_score(config, &logits[m * rc.E], rc.E, a);
      const double sb = selection_score(config, &logits[m * rc.E], rc.E, b);
      explained = std::fabs(sa - sb) <= 1e-6 * std::fabs(sa);
    }
    if (explained) {
      ++near_tie_rows;
    } else if (bad_rows++ < 5) {
      ADD_FAILURE() << "row " << m << " slot ids differ, first GPU id " << gpu_ids[m * rc.k]
                    << " CPU " << cpu_ids[m * rc.k];
    }
  }
  EXPECT_EQ(bad_rows, 0);
  EXPECT_LE(near_tie_rows, std::max<int64_t>(1, rc.M / 100));
}

TEST(CudaRouting, SoftmaxAndSigmoidMatchTheCpuAcrossShapes) {
  QMOE_REQUIRE_GPU();
  uint64_t seed = 1;
  for (int64_t E : {8, 60, 128, 256, 384, 512})
    for (int k : {1, 2, 6, 8, 16}) {
      if (k > E) continue;
      for (int64_t M : {1, 3, 37, 1000}) {
        for (Scoring s : {Scoring::softmax, Scoring::sigmoid}) {
          run_case({.M = M, .E = E, .k = k, .scoring = s}, seed++);
          run_case({.M = M, .E = E, .k = k, .scoring = s, .logits = Logits::quantized}, seed++);
        }
      }
    }
}

TEST(CudaRouting, LargeBatches) {
  QMOE_REQUIRE_GPU();
  run_case({.M = 8192, .E = 8, .k = 2}, 101);
  run_case({.M = 8192, .E = 128, .k = 8, .renormalize = false}, 102);
  run_case(
      {.M = 8192, .E = 384, .k = 8, .scoring = Scoring::sigmoid, .bias = true, .scaling = 2.5f},
      103);
  run_case({.M = 8192,
            .E = 256,
            .k = 8,
            .scoring = Scoring::sigmoid,
            .bias = true,
            .n_group = 8,
            .topk_group = 4,
            .scaling = 2.5f,
            .logits = Logits::quantized},
           104);
}

// Softmax scores depend on the row's sum, so score + bias can land within rounding of another
// expert's by chance: softmax with a bias is checked on continuous logits, where such near ties
// are recognised. Sigmoid scores of grid logits plus a grid bias form a fixed set with no near
// ties, so there the match must be exact.
TEST(CudaRouting, BiasSelectsButDoesNotWeigh) {
  QMOE_REQUIRE_GPU();
  uint64_t seed = 200;
  struct Kind {
    Scoring scoring;
    Logits logits;
  };
  for (int64_t E : {8, 60, 256})
    for (bool renorm : {true, false})
      for (const Kind kind :
           {Kind{Scoring::softmax, Logits::continuous}, Kind{Scoring::sigmoid, Logits::continuous},
            Kind{Scoring::sigmoid, Logits::quantized}})
        run_case({.M = 333,
                  .E = E,
                  .k = 6,
                  .scoring = kind.scoring,
                  .bias = true,
                  .renormalize = renorm,
                  .scaling = 1.5f,
                  .logits = kind.logits},
                 seed++);
}

// Group scores are compared exactly (no near-tie allowance), so only score sets without chance
// near ties: softmax without bias (group score = a member's score) and sigmoid of grid logits.
TEST(CudaRouting, GroupedTopK) {
  QMOE_REQUIRE_GPU();
  uint64_t seed = 300;
  struct Grouping {
    int64_t E;
    int n_group, topk_group, k;
  };
  for (const Grouping g : {Grouping{256, 8, 4, 8}, Grouping{60, 4, 2, 6}, Grouping{384, 16, 3, 8},
                           Grouping{128, 128, 8, 8}, Grouping{8, 2, 1, 2}}) {
    run_case({.M = 500,
              .E = g.E,
              .k = g.k,
              .n_group = g.n_group,
              .topk_group = g.topk_group,
              .logits = Logits::quantized},
             seed++);
    for (bool bias : {false, true}) {
      if (bias && g.E / g.n_group < 2) continue;  // top-2 group score needs two members
      run_case({.M = 500,
                .E = g.E,
                .k = g.k,
                .scoring = Scoring::sigmoid,
                .bias = bias,
                .n_group = g.n_group,
                .topk_group = g.topk_group,
                .logits = Logits::quantized},
               seed++);
    }
  }
}

TEST(CudaRouting, AllLogitsEqualPicksTheLowestIds) {
  QMOE_REQUIRE_GPU();
  const int64_t M = 5, E = 60;
  const int k = 6;
  std::vector<float> logits(M * E, 0.5f);
  DeviceBuffer logits_d = to_device(logits);
  DeviceBuffer w_d = poisoned(M * k * sizeof(float)), ids_d = poisoned(M * k * sizeof(int32_t));
  RoutingConfig config;
  config.top_k = k;
  QMOE_CUDA_CHECK(route_topk_cuda(routing_params(config, nullptr), logits_d.as<float>(), E, M, E,
                                  w_d.as<float>(), ids_d.as<int32_t>(), nullptr));
  const auto ids = to_host<int32_t>(ids_d, M * k);
  const auto w = to_host<float>(w_d, M * k);
  for (int64_t m = 0; m < M; ++m)
    for (int j = 0; j < k; ++j) {
      EXPECT_EQ(ids[m * k + j], j);
      EXPECT_FLOAT_EQ(w[m * k + j], 1.0f / k);
    }
}

TEST(CudaRouting, StridedLogits) {
  QMOE_REQUIRE_GPU();
  const int64_t M = 17, E = 60, stride = 64;
  const int k = 2;
  std::vector<float> logits(M * stride, 1e30f);  // the gap between rows must never be read
  std::mt19937_64 rng(7);
  std::normal_distribution<float> normal;
  for (int64_t m = 0; m < M; ++m)
    for (int64_t e = 0; e < E; ++e) logits[m * stride + e] = normal(rng);
  std::vector<float> packed(M * E);
  for (int64_t m = 0; m < M; ++m)
    for (int64_t e = 0; e < E; ++e) packed[m * E + e] = logits[m * stride + e];
  RoutingConfig config;
  config.top_k = k;
  std::vector<float> cpu_w(M * k);
  std::vector<int32_t> cpu_ids(M * k);
  route_topk(config, packed.data(), M, E, cpu_w.data(), cpu_ids.data());
  DeviceBuffer logits_d = to_device(logits);
  DeviceBuffer w_d = poisoned(M * k * sizeof(float)), ids_d = poisoned(M * k * sizeof(int32_t));
  QMOE_CUDA_CHECK(route_topk_cuda(routing_params(config, nullptr), logits_d.as<float>(), stride, M,
                                  E, w_d.as<float>(), ids_d.as<int32_t>(), nullptr));
  EXPECT_EQ(to_host<int32_t>(ids_d, M * k), cpu_ids);
  const auto w = to_host<float>(w_d, M * k);
  for (size_t i = 0; i < w.size(); ++i) EXPECT_NEAR(w[i], cpu_w[i], 1e-5f * cpu_w[i]);
}

TEST(CudaRouting, RejectsWhatTheKernelCannotDo) {
  RoutingParams p;
  p.top_k = 17;
  EXPECT_THROW(validate_routing(p, 64), Error);
  EXPECT_EQ(route_topk_cuda(p, nullptr, 64, 1, 64, nullptr, nullptr, nullptr),
            cudaErrorInvalidValue);
  p.top_k = 2;
  EXPECT_THROW(validate_routing(p, 513), Error);
  p.n_group = 7;
  p.topk_group = 2;
  EXPECT_THROW(validate_routing(p, 64), Error);  // 7 groups do not divide 64 experts
  p.n_group = 8;
  p.topk_group = 9;
  EXPECT_THROW(validate_routing(p, 64), Error);
  p.topk_group = 4;
  EXPECT_NO_THROW(validate_routing(p, 64));
}

}  // namespace
}  // namespace qmoe::test
