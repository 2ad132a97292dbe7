#include "sample/random_moe.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "core/convert.hpp"
#include "qmoe/quantize.hpp"
#include "sample/reference_moe.hpp"

namespace qmoe::sample {

void fill_normal(Buffer& b, std::mt19937_64& rng, double mean, double stddev) {
  std::normal_distribution<double> normal(mean, stddev);
  for (int64_t i = 0; i < b.numel(); ++i) store_from_double(b.data(), b.dtype(), i, normal(rng));
}

QuantizedWeight random_weight(int64_t E, int64_t N, int64_t K, const QuantScheme& scheme, bool bias,
                              std::mt19937_64& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> w(static_cast<size_t>(E * N * K));
  const float spread = 1.0f / std::sqrt(static_cast<float>(K));
  for (float& v : w) v = normal(rng) * spread;
  std::vector<float> b;
  if (bias) {
    b.resize(static_cast<size_t>(E * N));
    for (float& v : b) v = 0.1f * normal(rng);
  }
  std::vector<int32_t> perm;
  if (scheme.act_order) {
    perm.resize(static_cast<size_t>(E * K));
    for (int64_t e = 0; e < E; ++e) {
      auto first = perm.begin() + e * K;
      std::iota(first, first + K, 0);
      std::shuffle(first, first + K, rng);
    }
  }
  return quantize_rtn(w, E, N, K, scheme, b, perm);
}

MoECase make_case(const CaseSpec& s) {
  std::mt19937_64 rng(s.seed);
  MoEConfig config;
  config.num_experts = s.E;
  config.hidden = s.H;
  config.intermediate = s.I;
  config.routing.top_k = s.top_k;
  config.activation = s.activation;
  config.apply_router_weight_on_input = s.router_weight_on_input;
  config.w13_bias = s.bias;
  config.w2_bias = s.bias;
  validate(config);

  QuantizedWeight w13 = random_weight(s.E, config.w13_rows(), s.H, s.scheme, s.bias, rng);
  QuantizedWeight w2 = random_weight(s.E, s.H, s.I, s.scheme, s.bias, rng);
  return make_case(config, QuantizedExperts(std::move(w13), std::move(w2)), s.M, s.act_dtype, rng);
}

MoECase make_case(MoEConfig config, QuantizedExperts experts, int64_t M, DType act_dtype,
                  std::mt19937_64& rng) {
  MoECase c;
  c.config = std::move(config);
  const int64_t E = c.config.num_experts, H = c.config.hidden;
  const int top_k = c.config.top_k();
  c.experts = std::make_unique<QuantizedExperts>(std::move(experts));

  c.hidden = Buffer(act_dtype, {M, H});
  fill_normal(c.hidden, rng);
  c.router_logits = Buffer(DType::f32, {M, E});
  fill_normal(c.router_logits, rng);
  // Routing and truth both come from the independent reference, never from the code under test.
  const ReferenceRouting routing =
      reference_route(c.config.routing, c.router_logits.data_as<float>(), M, E);
  c.topk_weights = Buffer(DType::f32, {M, top_k});
  c.topk_ids = Buffer(DType::i32, {M, top_k});
  std::copy(routing.ids.begin(), routing.ids.end(), c.topk_ids.data_as<int32_t>());
  std::transform(routing.weights.begin(), routing.weights.end(), c.topk_weights.data_as<float>(),
                 [](double w) { return static_cast<float>(w); });
  c.reference = reference_forward(c.config, *c.experts, c.hidden, routing);
  return c;
}

double relative_error(const Buffer& out, const Buffer& reference) {
  check(out.numel() == reference.numel(), "relative_error: {} vs {} elements", out.numel(),
        reference.numel());
  double diff = 0.0, norm = 0.0;
  for (int64_t i = 0; i < out.numel(); ++i) {
    const double r = load_as_double(reference.data(), reference.dtype(), i);
    const double d = load_as_double(out.data(), out.dtype(), i) - r;
    diff += d * d;
    norm += r * r;
  }
  if (!std::isfinite(diff)) return INFINITY;
  return norm > 0.0 ? std::sqrt(diff / norm) : std::sqrt(diff);
}

}  // namespace qmoe::sample
