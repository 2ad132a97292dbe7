#include "sample/reference_moe.hpp"

#include <algorithm>
#include <cmath>
#include <optional>

#include "core/check.hpp"
#include "core/convert.hpp"

namespace qmoe::sample {

namespace {

// e2m1: bit 3 sign, bits 2..1 exponent (bias 1), bit 0 mantissa; exponent 0 is subnormal.
double e2m1_value(int code) {
  const int exponent = (code >> 1) & 3, mantissa = code & 1;
  const double magnitude =
      exponent == 0 ? 0.5 * mantissa : std::ldexp(1.0 + 0.5 * mantissa, exponent - 1);
  return (code & 8) ? -magnitude : magnitude;
}

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

// One output of the activation for intermediate channel j of a GEMM1 row `h` (2I or I wide).
double activate(const MoEConfig& c, const std::vector<double>& h, int64_t I, int64_t j) {
  const double alpha = c.activation_params.alpha, limit = c.activation_params.limit;
  const auto clamped_swiglu = [&](double gate, double up, double beta) {
    gate = std::min(gate, limit);
    up = std::max(-limit, std::min(up, limit));
    return gate * sigmoid(alpha * gate) * (up + beta);
  };
  const auto gelu = [](double x) { return x * 0.5 * std::erfc(-x / std::sqrt(2.0)); };
  const auto gelu_tanh = [](double x) {
    const double inner = std::sqrt(2.0 / M_PI) * (x + 0.044715 * std::pow(x, 3));
    return 0.5 * x * (1.0 + std::tanh(inner));
  };
  switch (c.activation) {
    case Activation::silu: return h[j] * sigmoid(h[j]) * h[I + j];
    case Activation::gelu: return gelu(h[j]) * h[I + j];
    case Activation::gelu_tanh: return gelu_tanh(h[j]) * h[I + j];
    case Activation::swigluoai: return clamped_swiglu(h[2 * j], h[2 * j + 1], 1.0);
    case Activation::swigluoai_uninterleave:
      return clamped_swiglu(h[j], h[I + j], c.activation_params.beta);
    case Activation::silu_no_mul: return h[j] * sigmoid(h[j]);
    case Activation::gelu_no_mul: return gelu(h[j]);
    case Activation::gelu_tanh_no_mul: return gelu_tanh(h[j]);
    case Activation::relu2_no_mul: return h[j] <= 0.0 ? 0.0 : h[j] * h[j];
  }
  fail("reference: unknown activation");
}

// One expert's weight decoded to float64, row-major [N, K], plus its bias (empty if none).
struct DecodedExpert {
  std::vector<double> w, bias;
};

DecodedExpert decode_expert(const QuantizedWeight& q, int64_t e) {
  DecodedExpert d;
  d.w.resize(static_cast<size_t>(q.N * q.K));
  for (int64_t n = 0; n < q.N; ++n)
    for (int64_t k = 0; k < q.K; ++k) d.w[n * q.K + k] = reference_weight(q, e, n, k);
  if (!q.bias.empty())
    d.bias.assign(q.bias.data_as<float>() + e * q.N, q.bias.data_as<float>() + (e + 1) * q.N);
  return d;
}

// y = W x + b over one decoded expert.
std::vector<double> apply(const DecodedExpert& d, const std::vector<double>& x, int64_t N) {
  const int64_t K = static_cast<int64_t>(x.size());
  std::vector<double> y(N);
  for (int64_t n = 0; n < N; ++n) {
    double acc = d.bias.empty() ? 0.0 : d.bias[n];
    for (int64_t k = 0; k < K; ++k) acc += d.w[n * K + k] * x[k];
    y[n] = acc;
  }
  return y;
}

// W4A4's input quantization, written apart from the code under test. Per block of 32 along K the
// scale is 2^(floor(log2 max|x|) - 2) (2: the exponent of e2m1's largest value, 6 = 1.5 * 2^2), at
// least 2^-127 (e8m0's smallest): the OCP MX v1.0 specification (section 6.3). Quark's "even"
// rule (mxfp4_even) first rounds max|x| to a power of two: 2^e from 2^e up to but not including
// 1.75 * 2^e, 2^(e+1) from there. Quark rounds in float32, where 2^128 is infinity, and clamps
// infinity's scale exponent to e8m0's largest, 127. Each element becomes the e2m1 value nearest
// to x / scale, rounding halfway cases to an even multiple of e2m1's spacing there (ties to
// even), at most 6 in magnitude. A non-finite block is NaN.
void mx_quantize_input(const QuantScheme& s, std::vector<double>& x) {
  if (s.activation_quant == ActivationQuant::none) return;
  const bool even = s.activation_quant == ActivationQuant::mxfp4_even;
  for (size_t block = 0; block < x.size(); block += 32) {
    const auto begin = x.begin() + static_cast<ptrdiff_t>(block), end = begin + 32;
    if (!std::all_of(begin, end, [](double v) { return std::isfinite(v); })) {
      std::fill(begin, end, NAN);
      continue;
    }
    double amax = 0.0;
    for (auto it = begin; it != end; ++it) amax = std::max(amax, std::fabs(*it));
    if (amax == 0.0) continue;
    int e = std::ilogb(amax);
    if (even && amax >= 1.75 * std::ldexp(1.0, e)) ++e;
    const double scale = std::ldexp(1.0, even && e >= 128 ? 127 : std::max(e - 2, -127));
    for (auto it = begin; it != end; ++it) {
      const double v = std::fabs(*it) / scale;
      // e2m1's values are 0, 0.5, 1, 1.5, 2, 3, 4, 6: spacing 0.5 below 2, 1 below 4, 2 above.
      const double spacing = v < 2.0 ? 0.5 : v < 4.0 ? 1.0 : 2.0;
      *it = std::copysign(std::min(6.0, spacing * std::nearbyint(v / spacing)) * scale, *it);
    }
  }
}

}  // namespace

double reference_weight(const QuantizedWeight& w, int64_t e, int64_t n, int64_t k) {
  const QuantScheme& s = w.scheme;
  const int64_t row_bytes = s.bits == 8 ? w.K : w.K / 2;
  const uint8_t* row = w.codes.data_as<uint8_t>() + (e * w.N + n) * row_bytes;
  // 4-bit: element 2i in the low nibble of byte i, 2i+1 in the high one.
  const int code = s.bits == 8 ? row[k] : (row[k / 2] >> (k % 2 == 0 ? 0 : 4)) & 0xf;
  const int64_t scale_K = w.K_full > 0 ? w.K_full : w.K;
  const int64_t group_size = s.group_size == kChannelwise ? scale_K : s.group_size;
  const int64_t groups = scale_K / group_size;
  const int64_t group = s.act_order ? w.g_idx.data_as<int32_t>()[e * w.K + k] : k / group_size;
  const int64_t at = (e * w.N + n) * groups + group;
  if (s.kind == WeightKind::mxfp4)
    return e2m1_value(code) * std::ldexp(1.0, int{w.scales.data_as<uint8_t>()[at]} - 127);
  const int zero =
      s.zero_point == ZeroPoint::explicit_ ? w.zeros.data_as<uint8_t>()[at] : 1 << (s.bits - 1);
  return double(code - zero) * double(w.scales.data_as<float>()[at]);
}

ReferenceRouting reference_route(const RoutingConfig& c, const float* logits, int64_t M,
                                 int64_t E) {
  ReferenceRouting r;
  r.top_k = c.top_k;
  std::vector<double> score(E), choice(E);
  for (int64_t m = 0; m < M; ++m) {
    const float* row = logits + m * E;
    const double peak = *std::max_element(row, row + E);
    double total = 0.0;
    for (int64_t e = 0; e < E; ++e) total += std::exp(double(row[e]) - peak);
    for (int64_t e = 0; e < E; ++e) {
      score[e] = c.scoring == Scoring::softmax ? std::exp(double(row[e]) - peak) / total
                                               : sigmoid(double(row[e]));
      choice[e] = score[e] + (c.correction_bias.empty() ? 0.0 : c.correction_bias[e]);
    }
    if (c.n_group > 0) {
      const int64_t per = E / c.n_group;
      std::vector<double> group_score(c.n_group);
      for (int g = 0; g < c.n_group; ++g) {
        std::vector<double> members(choice.begin() + g * per, choice.begin() + (g + 1) * per);
        std::sort(members.rbegin(), members.rend());
        group_score[g] = c.correction_bias.empty() ? members[0] : members[0] + members[1];
      }
      std::vector<bool> kept(c.n_group, false);
      for (int round = 0; round < c.topk_group; ++round) {
        int best = -1;
        for (int g = 0; g < c.n_group; ++g)
          if (!kept[g] && (best < 0 || group_score[g] > group_score[best])) best = g;
        kept[best] = true;
      }
      for (int64_t e = 0; e < E; ++e)
        if (!kept[e / per]) choice[e] = -INFINITY;
    }
    std::vector<bool> taken(E, false);
    double sum = 0.0;
    for (int j = 0; j < c.top_k; ++j) {
      int64_t best = -1;
      for (int64_t e = 0; e < E; ++e)
        if (!taken[e] && (best < 0 || choice[e] > choice[best])) best = e;
      taken[best] = true;
      r.ids.push_back(static_cast<int32_t>(best));
      r.weights.push_back(score[best]);
      sum += score[best];
    }
    for (int j = 0; j < c.top_k; ++j) {
      double& w = r.weights[r.weights.size() - c.top_k + j];
      w = (c.renormalize ? w / sum : w) * c.routed_scaling_factor;
    }
  }
  return r;
}

Buffer reference_forward(const MoEConfig& c, const QuantizedExperts& experts, const Buffer& hidden,
                         const ReferenceRouting& routing) {
  const int64_t M = hidden.dim(0), H = c.hidden, I = c.intermediate, k = routing.top_k;
  const int64_t gemm1_rows = is_gated(c.activation) ? 2 * I : I;
  for (int64_t m = 0; m < M; ++m) {
    for (int64_t j = 0; j < k; ++j) {
      const int64_t e = routing.ids[m * k + j];
      check(e >= 0 && e < c.num_experts, "reference: token {} slot {} routes to expert {} of {}", m,
            j, e, c.num_experts);
    }
  }
  Buffer out(DType::f64, {M, H});  // zeroed: every token's sum starts at 0
  double* sums = out.data_as<double>();
  // One expert decoded at a time, applied to every (token, slot) routed to it: a whole layer in
  // float64 is 16x its int4 codes, more memory than the code under test needs.
  for (int64_t e = 0; e < c.num_experts; ++e) {
    std::optional<std::pair<DecodedExpert, DecodedExpert>> decoded;
    for (int64_t m = 0; m < M; ++m) {
      for (int64_t j = 0; j < k; ++j) {
        if (routing.ids[m * k + j] != e) continue;
        if (!decoded)
          decoded.emplace(decode_expert(experts.w13(), e), decode_expert(experts.w2(), e));
        const double weight = routing.weights[m * k + j];
        std::vector<double> x(H);
        for (int64_t i = 0; i < H; ++i) {
          x[i] = load_as_double(hidden.data(), hidden.dtype(), m * H + i);
          if (c.apply_router_weight_on_input) x[i] *= weight;
        }
        mx_quantize_input(experts.w13().scheme, x);
        const std::vector<double> h = apply(decoded->first, x, gemm1_rows);
        std::vector<double> a(I);
        for (int64_t i = 0; i < I; ++i) a[i] = activate(c, h, I, i);
        mx_quantize_input(experts.w2().scheme, a);
        const std::vector<double> y = apply(decoded->second, a, H);
        const double scale = c.apply_router_weight_on_input ? 1.0 : weight;
        for (int64_t i = 0; i < H; ++i) sums[m * H + i] += scale * y[i];
      }
    }
  }
  return out;
}

}  // namespace qmoe::sample
