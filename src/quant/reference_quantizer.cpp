#include <algorithm>
#include <cmath>
#include <vector>

#include "core/check.hpp"
#include "qmoe/quantize.hpp"
#include "quant/mxfp4.hpp"

namespace qmoe {

namespace {

void put_code(uint8_t* row, int bits, int64_t k, int q) {
  if (bits == 8) {
    row[k] = static_cast<uint8_t>(q);
  } else if (k & 1) {
    row[k / 2] = static_cast<uint8_t>((row[k / 2] & 0x0f) | (q << 4));
  } else {
    row[k / 2] = static_cast<uint8_t>((row[k / 2] & 0xf0) | q);
  }
}

// Quantizes the channels `channels` (all in one group) of one row.
void quantize_group(const float* w, std::span<const int64_t> channels, const QuantScheme& s,
                    uint8_t* code_row, float* scale, uint8_t* zero, uint8_t* e8m0) {
  float lo = 0.0f, hi = 0.0f, absmax = 0.0f;
  for (int64_t k : channels) {
    lo = std::min(lo, w[k]);
    hi = std::max(hi, w[k]);
    absmax = std::max(absmax, std::fabs(w[k]));
  }
  if (s.kind == WeightKind::mxfp4) {
    const int exponent = absmax > 0.0f ? static_cast<int>(std::ceil(std::log2(absmax / 6.0f))) : 0;
    const int biased = std::clamp(exponent + 127, 0, 254);
    *e8m0 = static_cast<uint8_t>(biased);
    const float sc = std::ldexp(1.0f, biased - 127);
    for (int64_t k : channels) put_code(code_row, 4, k, float_to_e2m1(w[k] / sc));
    return;
  }
  const int qmax = s.max_code();
  float sc = 0.0f;
  int z = s.implicit_zero();
  if (s.has_zero_points()) {
    sc = (hi - lo) / static_cast<float>(qmax);
    if (sc > 0.0f) z = std::clamp(static_cast<int>(std::lround(-lo / sc)), 0, qmax);
  } else {
    sc = absmax / static_cast<float>(s.implicit_zero() - 1);
  }
  if (!(sc > 0.0f)) sc = 1.0f;
  *scale = sc;
  if (zero) *zero = static_cast<uint8_t>(z);
  for (int64_t k : channels) {
    const int q = static_cast<int>(std::lround(w[k] / sc)) + z;
    put_code(code_row, s.bits, k, std::clamp(q, 0, qmax));
  }
}

}  // namespace

QuantizedWeight quantize_rtn(std::span<const float> weights, int64_t E, int64_t N, int64_t K,
                             const QuantScheme& scheme, std::span<const float> bias,
                             std::span<const int32_t> act_order_perm) {
  validate(scheme);
  check(E > 0 && N > 0 && K > 0, "quantize: shape [{}, {}, {}] must be positive", E, N, K);
  check(static_cast<int64_t>(weights.size()) == E * N * K,
        "quantize: {} weights given for shape [{}, {}, {}]", weights.size(), E, N, K);
  const int64_t G = scheme.group_size_for(K);
  check(K % G == 0, "quantize: group size {} does not divide K = {}", G, K);
  check(scheme.bits == 8 || K % 2 == 0, "quantize: 4-bit codes need an even K, got {}", K);
  check(bias.empty() || static_cast<int64_t>(bias.size()) == E * N,
        "quantize: bias has {} values, expected E * N = {}", bias.size(), E * N);
  check(
      scheme.act_order == !act_order_perm.empty(),
      "quantize: an act-order permutation [E, K] is needed exactly when the scheme has act-order");
  check(act_order_perm.empty() || static_cast<int64_t>(act_order_perm.size()) == E * K,
        "quantize: act-order permutation has {} entries, expected E * K = {}",
        act_order_perm.size(), E * K);

  const int64_t groups = K / G;
  QuantizedWeight q;
  q.scheme = scheme;
  q.E = E;
  q.N = N;
  q.K = K;
  q.codes = Buffer(DType::u8, {E, N, q.code_bytes_per_row()});
  const bool mx = scheme.kind == WeightKind::mxfp4;
  q.scales = Buffer(mx ? DType::u8 : DType::f32, {E, N, groups});
  if (scheme.has_zero_points()) q.zeros = Buffer(DType::u8, {E, N, groups});
  if (scheme.act_order) q.g_idx = Buffer(DType::i32, {E, K});
  if (!bias.empty()) {
    q.bias = Buffer(DType::f32, {E, N});
    std::copy(bias.begin(), bias.end(), q.bias.data_as<float>());
  }

  std::vector<int64_t> order(static_cast<size_t>(K));
  for (int64_t e = 0; e < E; ++e) {
    for (int64_t j = 0; j < K; ++j) {
      order[j] = scheme.act_order ? act_order_perm[e * K + j] : j;
      check(order[j] >= 0 && order[j] < K, "quantize: act-order permutation of expert {} has {}", e,
            order[j]);
    }
    if (scheme.act_order) {
      std::vector<bool> seen(static_cast<size_t>(K));
      for (int64_t j = 0; j < K; ++j) {
        check(!seen[order[j]], "quantize: act-order permutation of expert {} repeats channel {}", e,
              order[j]);
        seen[order[j]] = true;
        q.g_idx.data_as<int32_t>()[e * K + order[j]] = static_cast<int32_t>(j / G);
      }
    }
    for (int64_t n = 0; n < N; ++n) {
      const float* w = weights.data() + (e * N + n) * K;
      uint8_t* code_row = q.codes.data_as<uint8_t>() + (e * N + n) * q.code_bytes_per_row();
      for (int64_t g = 0; g < groups; ++g) {
        const int64_t at = (e * N + n) * groups + g;
        const std::span<const int64_t> channels(order.data() + g * G, static_cast<size_t>(G));
        quantize_group(w, channels, scheme, code_row, mx ? nullptr : q.scales.data_as<float>() + at,
                       scheme.has_zero_points() ? q.zeros.data_as<uint8_t>() + at : nullptr,
                       mx ? q.scales.data_as<uint8_t>() + at : nullptr);
      }
    }
  }
  q.validate("quantized weight");
  return q;
}

}  // namespace qmoe
