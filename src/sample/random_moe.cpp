#include "sample/random_moe.hpp"

#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <vector>

#include "core/check.hpp"
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

QuantizedWeight random_codes_weight(int64_t E, int64_t N, int64_t K, const QuantScheme& scheme,
                                    std::mt19937_64& rng) {
  check(!scheme.act_order, "random_codes_weight: schemes without act-order only, got {}",
        to_string(scheme));
  QuantizedWeight w;
  w.scheme = scheme;
  w.E = E;
  w.N = N;
  w.K = K;
  w.codes = Buffer(DType::u8, {E, N, w.code_bytes_per_row()});
  const auto fill_bytes = [&rng](Buffer& b) {
    uint8_t* bytes = b.data_as<uint8_t>();
    for (int64_t i = 0; i < b.nbytes(); i += 8) {
      const uint64_t word = rng();
      std::memcpy(bytes + i, &word, static_cast<size_t>(std::min<int64_t>(8, b.nbytes() - i)));
    }
  };
  fill_bytes(w.codes);
  const int64_t groups = scheme.groups_for(K);
  if (scheme.kind == WeightKind::mxfp4) {
    // e2m1 codes have an rms near 3: scales 2^(b - 1), 2^b, 2^(b + 1) around 1 / (3 sqrt K).
    const int b = static_cast<int>(std::lround(-std::log2(3.0 * std::sqrt(double(K)))));
    w.scales = Buffer(DType::u8, {E, N, groups});
    for (uint8_t& s : w.scales.span<uint8_t>())
      s = static_cast<uint8_t>(127 + b + int(rng() % 3) - 1);
    return w;
  }
  w.scales = Buffer(DType::f32, {E, N, groups});
  std::uniform_real_distribution<float> spread(0.75f, 1.25f);
  const float scale = 1.0f / (4.6f * std::sqrt(static_cast<float>(K)));
  for (float& s : w.scales.span<float>()) s = scale * spread(rng);
  if (scheme.has_zero_points()) {
    w.zeros = Buffer(DType::u8, {E, N, groups});
    fill_bytes(w.zeros);
    for (uint8_t& z : w.zeros.span<uint8_t>()) z = static_cast<uint8_t>(z & scheme.max_code());
  }
  return w;
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
  Buffer hidden(act_dtype, {M, config.hidden});
  fill_normal(hidden, rng);
  Buffer router_logits(DType::f32, {M, config.num_experts});
  fill_normal(router_logits, rng);
  return make_case(std::move(config), std::move(experts), std::move(hidden),
                   std::move(router_logits));
}

MoECase make_case(MoEConfig config, QuantizedExperts experts, Buffer hidden, Buffer router_logits) {
  MoECase c;
  c.config = std::move(config);
  const int64_t E = c.config.num_experts, H = c.config.hidden, M = hidden.shape()[0];
  const int top_k = c.config.top_k();
  check(hidden.shape().size() == 2 && hidden.shape()[1] == H && is_float_activation(hidden.dtype()),
        "hidden states must be [M, {}] of f32, bf16 or f16, got {} {}", H, name(hidden.dtype()),
        fmt::join(hidden.shape(), "x"));
  check(router_logits.dtype() == DType::f32 && router_logits.shape().size() == 2 &&
            router_logits.shape()[0] == M && router_logits.shape()[1] == E,
        "router logits must be f32 [{}, {}] (tokens, experts), got {} {}", M, E,
        name(router_logits.dtype()), fmt::join(router_logits.shape(), "x"));
  c.experts = std::make_unique<QuantizedExperts>(std::move(experts));
  c.hidden = std::move(hidden);
  c.router_logits = std::move(router_logits);
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

void round_to_dtype(Buffer& f32_values, DType dtype) {
  for (float& v : f32_values.span<float>()) {
    alignas(8) std::byte stored[8]{};
    store_from_double(stored, dtype, 0, v);
    v = static_cast<float>(load_as_double(stored, dtype, 0));
  }
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
