#include <cmath>

#include "core/check.hpp"
#include "qmoe/quant.hpp"
#include "quant/mxfp4.hpp"

namespace qmoe {

int QuantizedWeight::code(int64_t e, int64_t n, int64_t k) const {
  const uint8_t* row = codes.data_as<uint8_t>() + (e * N + n) * code_bytes_per_row();
  if (scheme.bits == 8) return row[k];
  const uint8_t byte = row[k / 2];
  return (k & 1) ? byte >> 4 : byte & 0x0f;
}

int64_t QuantizedWeight::group_of(int64_t e, int64_t k) const {
  if (scheme.act_order) return g_idx.data_as<int32_t>()[e * K + k];
  return k / scheme.group_size_for(K);
}

float QuantizedWeight::dequant(int64_t e, int64_t n, int64_t k) const {
  const int64_t groups = this->groups();
  const int64_t g = group_of(e, k);
  const int64_t at = (e * N + n) * groups + g;
  const int q = code(e, n, k);
  if (scheme.kind == WeightKind::mxfp4) {
    return e2m1_to_float(q) * e8m0_to_float(scales.data_as<uint8_t>()[at]);
  }
  const int zero = scheme.has_zero_points() ? zeros.data_as<uint8_t>()[at] : scheme.implicit_zero();
  return static_cast<float>(q - zero) * scales.data_as<float>()[at];
}

namespace {

void check_shape(const Buffer& b, const std::string& what, DType dtype,
                 std::initializer_list<int64_t> expected) {
  std::string want, got;
  for (int64_t d : expected) want += fmt::format("{}{}", want.empty() ? "" : ", ", d);
  for (int64_t d : b.shape()) got += fmt::format("{}{}", got.empty() ? "" : ", ", d);
  bool same = b.rank() == static_cast<int>(expected.size());
  for (int i = 0; same && i < b.rank(); ++i) same = b.dim(i) == expected.begin()[i];
  check(same && b.dtype() == dtype, "{} must be {}[{}], got {}[{}]", what, name(dtype), want,
        name(b.dtype()), got);
}

}  // namespace

void QuantizedWeight::validate(const std::string& what) const {
  try {
    qmoe::validate(scheme);
  } catch (const Error& e) {
    fail("{}: {}", what, e.what());
  }
  check(E > 0 && N > 0 && K > 0, "{}: shape [E, N, K] = [{}, {}, {}] must be positive", what, E, N,
        K);
  check(K_full == 0 || (scheme.act_order && K_full >= K),
        "{}: K_full = {} (full-K scales of a K-split shard) needs act-order and K_full >= K = {}",
        what, K_full, K);
  const int64_t scale_K = K_full > 0 ? K_full : K;
  const int64_t G = scheme.group_size_for(scale_K);
  check(scale_K % G == 0, "{}: group size {} does not divide K = {} (valid: a divisor of K, or -1)",
        what, G, scale_K);
  check(scheme.bits == 8 || K % 2 == 0, "{}: 4-bit codes pack two per byte, so K = {} must be even",
        what, K);
  const int64_t groups = scale_K / G;
  check_shape(codes, what + ".codes", DType::u8, {E, N, code_bytes_per_row()});
  const auto scale_at = [&](int64_t i) {
    return fmt::format("{}.scales: element {} (expert {}, row {}, group {})", what, i,
                       i / (N * groups), i / groups % N, i % groups);
  };
  if (scheme.kind == WeightKind::mxfp4) {
    check_shape(scales, what + ".scales", DType::u8, {E, N, groups});
    const uint8_t* s = scales.data_as<uint8_t>();
    for (int64_t i = 0; i < scales.numel(); ++i) {
      if (s[i] == kE8m0Nan) fail("{} is 0xff, the e8m0 NaN ({})", scale_at(i), kE8m0Valid);
    }
  } else {
    check_shape(scales, what + ".scales", DType::f32, {E, N, groups});
    const float* s = scales.data_as<float>();
    for (int64_t i = 0; i < scales.numel(); ++i) {
      if (!std::isfinite(s[i])) fail("{} is {} (valid: a finite scale)", scale_at(i), s[i]);
    }
  }
  if (scheme.has_zero_points()) {
    check_shape(zeros, what + ".zeros", DType::u8, {E, N, groups});
    const uint8_t* z = zeros.data_as<uint8_t>();
    for (int64_t i = 0; i < zeros.numel(); ++i) {
      check(z[i] <= scheme.max_code(), "{}.zeros: element {} is {}, above the {}-bit maximum {}",
            what, i, z[i], scheme.bits, scheme.max_code());
    }
  } else {
    check(zeros.empty(), "{}: zero points given but the scheme ({}) is symmetric", what,
          to_string(scheme));
  }
  if (scheme.act_order) {
    check_shape(g_idx, what + ".g_idx", DType::i32, {E, K});
    const int32_t* g = g_idx.data_as<int32_t>();
    for (int64_t i = 0; i < g_idx.numel(); ++i) {
      check(g[i] >= 0 && g[i] < groups, "{}.g_idx: expert {} channel {} has group {}, valid 0..{}",
            what, i / K, i % K, g[i], groups - 1);
    }
  } else {
    check(g_idx.empty(), "{}: g_idx given but the scheme has no act-order", what);
  }
  if (has_bias()) check_shape(bias, what + ".bias", DType::f32, {E, N});
}

QuantizedWeight QuantizedWeight::clone() const {
  return QuantizedWeight{
      scheme,       E,     N, K, codes.clone(), scales.clone(), zeros.clone(), g_idx.clone(),
      bias.clone(), K_full};
}

QuantizedExperts::QuantizedExperts(QuantizedWeight w13, QuantizedWeight w2)
    : w13_(std::move(w13)), w2_(std::move(w2)) {
  w13_.validate("w13");
  w2_.validate("w2");
  check(w13_.E == w2_.E, "w13 has {} experts but w2 has {}", w13_.E, w2_.E);
  check(w13_.K == w2_.N, "w13's K (hidden, {}) must equal w2's N ({})", w13_.K, w2_.N);
  check(w13_.N == 2 * w2_.K || w13_.N == w2_.K,
        "w13 has {} rows; with intermediate size I = {} (w2's K) it must be 2I = {} (gated) or I",
        w13_.N, w2_.K, 2 * w2_.K);
}

QuantizedExperts QuantizedExperts::clone() const { return {w13_.clone(), w2_.clone()}; }

std::pair<QuantizedWeight, QuantizedWeight> QuantizedExperts::release() && {
  return {std::move(w13_), std::move(w2_)};
}

}  // namespace qmoe
