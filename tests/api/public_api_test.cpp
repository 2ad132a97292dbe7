// What a user writes: quantize float weights, build a layer (here by move assignment), run it.
// Public headers only. The expected output is computed here from the user's own float weights, so
// the test also bounds the quantization error of the reference quantizer (int8 channelwise: < 1%
// normalized).
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "qmoe/qmoe.hpp"

namespace {

TEST(PublicApi, QuantizeBuildAndRunALayer) {
  const int64_t E = 4, H = 32, I = 16, M = 3;
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> w13(E * 2 * I * H), w2(E * H * I), x(M * H), logits(M * E);
  for (auto* v : {&w13, &w2, &x, &logits})
    for (float& f : *v) f = normal(rng);

  const qmoe::QuantScheme scheme{.bits = 8, .group_size = qmoe::kChannelwise};
  qmoe::QuantizedExperts experts(qmoe::quantize_rtn(w13, E, 2 * I, H, scheme),
                                 qmoe::quantize_rtn(w2, E, H, I, scheme));
  qmoe::MoEConfig config;
  config.num_experts = E;
  config.hidden = H;
  config.intermediate = I;
  config.routing.top_k = 1;
  // A layer of other weights on another backend first, replaced by move assignment (which must
  // release the old layer and leave exactly the new one).
  qmoe::QuantizedExperts other(
      qmoe::quantize_rtn(std::vector<float>(w13.size(), 0.5f), E, 2 * I, H, scheme),
      qmoe::quantize_rtn(std::vector<float>(w2.size(), -0.5f), E, H, I, scheme));
  qmoe::MoE moe(config, other, "cpu");
  moe = qmoe::MoE(config, experts, "emulation");

  std::vector<float> out(M * H);
  moe.forward(qmoe::TensorView(x.data(), qmoe::DType::f32, {M, H}),
              qmoe::TensorView(logits.data(), qmoe::DType::f32, {M, E}),
              qmoe::TensorView(out.data(), qmoe::DType::f32, {M, H}));

  // Top-1 with renormalization gives weight 1: out = W2[e] silu-and-mul(W13[e] x).
  double diff = 0, norm = 0;
  for (int64_t m = 0; m < M; ++m) {
    int64_t e = 0;
    for (int64_t j = 1; j < E; ++j)
      if (logits[m * E + j] > logits[m * E + e]) e = j;
    std::vector<double> h(2 * I), a(I);
    for (int64_t n = 0; n < 2 * I; ++n)
      for (int64_t k = 0; k < H; ++k) h[n] += double(w13[(e * 2 * I + n) * H + k]) * x[m * H + k];
    for (int64_t j = 0; j < I; ++j) a[j] = h[j] / (1 + std::exp(-h[j])) * h[I + j];
    for (int64_t n = 0; n < H; ++n) {
      double y = 0;
      for (int64_t k = 0; k < I; ++k) y += double(w2[(e * H + n) * I + k]) * a[k];
      diff += (out[m * H + n] - y) * (out[m * H + n] - y);
      norm += y * y;
    }
  }
  EXPECT_LT(std::sqrt(diff / norm), 1e-2);
}

TEST(PublicApi, ErrorsAreQmoeErrors) {
  EXPECT_THROW(qmoe::parse_activation("nope"), qmoe::Error);
  EXPECT_THROW(qmoe::validate(qmoe::QuantScheme{.bits = 2}), qmoe::Error);
}

}  // namespace
