// Activations against formulas written independently here (erfc form of GELU, logistic via
// tanh), at random points spanning the clamp limits.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "act/activation.hpp"

namespace qmoe {
namespace {

double logistic(double x) { return 0.5 * (1.0 + std::tanh(x / 2)); }
double gelu_exact(double x) { return x * 0.5 * std::erfc(-x / std::sqrt(2.0)); }
double gelu_approx(double x) {
  return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
}
double oai(double g, double u, double alpha, double limit, double beta) {
  g = std::min(g, limit);
  u = std::max(-limit, std::min(u, limit));
  return g * logistic(alpha * g) * (u + beta);
}

double expected(Activation a, const ActivationParams& p, const std::vector<double>& row, int64_t I,
                int64_t j) {
  const double g = row[j], u = is_gated(a) ? row[I + j] : 0;
  switch (a) {
    case Activation::silu: return g * logistic(g) * u;
    case Activation::gelu: return gelu_exact(g) * u;
    case Activation::gelu_tanh: return gelu_approx(g) * u;
    case Activation::swigluoai: return oai(row[2 * j], row[2 * j + 1], p.alpha, p.limit, 1.0);
    case Activation::swigluoai_uninterleave: return oai(g, u, p.alpha, p.limit, p.beta);
    case Activation::silu_no_mul: return g * logistic(g);
    case Activation::gelu_no_mul: return gelu_exact(g);
    case Activation::gelu_tanh_no_mul: return gelu_approx(g);
    case Activation::relu2_no_mul: return g > 0 ? g * g : 0;
  }
  return NAN;
}

class ActivationMatchesFormula : public testing::TestWithParam<Activation> {};

TEST_P(ActivationMatchesFormula, FloatAndDouble) {
  const Activation a = GetParam();
  ActivationParams p;
  p.beta = 0.5f;  // a non-default beta, to see it used by the uninterleaved form only
  const int64_t rows = 5, I = 37, width = is_gated(a) ? 2 * I : I;
  std::mt19937_64 rng(3);
  std::uniform_real_distribution<double> uniform(-10.0, 10.0);  // beyond the clamp limit 7
  std::vector<double> in(rows * width), out(rows * I);
  for (double& v : in) v = uniform(rng);
  std::vector<float> in_f(in.begin(), in.end()), out_f(rows * I);
  apply_activation(a, p, in.data(), rows, I, out.data());
  apply_activation(a, p, in_f.data(), rows, I, out_f.data());
  for (int64_t r = 0; r < rows; ++r) {
    const std::vector<double> row(in.begin() + r * width, in.begin() + (r + 1) * width);
    for (int64_t j = 0; j < I; ++j) {
      const double want = expected(a, p, row, I, j);
      EXPECT_NEAR(out[r * I + j], want, 1e-12 * std::max(1.0, std::fabs(want)));
      EXPECT_NEAR(out_f[r * I + j], want, 2e-6 * std::max(1.0, std::fabs(want)));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(All, ActivationMatchesFormula, testing::ValuesIn(all_activations()),
                         [](const testing::TestParamInfo<Activation>& p) {
                           return std::string(name(p.param));
                         });

TEST(Activation, SwigluOaiClampsGateAboveOnlyAndUpBothWays) {
  const ActivationParams p;  // alpha 1.702, limit 7
  const double big_gate[] = {100.0, 1.0};
  double out = 0;
  apply_activation(Activation::swigluoai, p, big_gate, 1, 1, &out);
  EXPECT_NEAR(out, 7.0 * logistic(double(p.alpha) * 7.0) * 2.0, 1e-12);
  const double low_gate[] = {-100.0, -100.0};
  apply_activation(Activation::swigluoai, p, low_gate, 1, 1, &out);
  EXPECT_NEAR(out, -100.0 * logistic(double(p.alpha) * -100.0) * (-7.0 + 1.0), 1e-12);
}

}  // namespace
}  // namespace qmoe
