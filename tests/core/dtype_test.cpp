// 16-bit float conversions against independent decoders (ldexp over the bit fields) and a
// brute-force nearest-value search with ties to even.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "qmoe/dtype.hpp"

namespace qmoe {
namespace {

double decode_half_bits(uint16_t bits) {
  const int sign = bits >> 15, exponent = (bits >> 10) & 0x1f, mantissa = bits & 0x3ff;
  double v = exponent == 0 ? std::ldexp(mantissa, -24) : std::ldexp(1024 + mantissa, exponent - 25);
  if (exponent == 0x1f) v = mantissa ? NAN : INFINITY;
  return sign ? -v : v;
}

double decode_bf16_bits(uint16_t bits) {
  const int sign = bits >> 15, exponent = (bits >> 7) & 0xff, mantissa = bits & 0x7f;
  double v =
      exponent == 0 ? std::ldexp(mantissa, -133) : std::ldexp(128 + mantissa, exponent - 134);
  if (exponent == 0xff) v = mantissa ? NAN : INFINITY;
  return sign ? -v : v;
}

// All finite non-negative values of a 16-bit format, ascending, with their bit patterns.
std::vector<std::pair<double, uint16_t>> finite_values(double (*decode)(uint16_t)) {
  std::vector<std::pair<double, uint16_t>> values;
  for (uint32_t b = 0; b < 0x8000; ++b) {
    const double v = decode(static_cast<uint16_t>(b));
    if (std::isfinite(v)) values.emplace_back(v, static_cast<uint16_t>(b));
  }
  std::sort(values.begin(), values.end());
  return values;
}

// Nearest representable magnitude, ties to the even bit pattern; beyond the largest finite value
// by at least half an ulp the result is infinity (IEEE round-to-nearest overflow rule).
uint16_t nearest(const std::vector<std::pair<double, uint16_t>>& values, double a,
                 uint16_t inf_bits) {
  const auto hi = std::lower_bound(values.begin(), values.end(), std::make_pair(a, uint16_t{0}));
  if (hi == values.end()) {
    const double top = values.back().first;
    const double ulp = top - values[values.size() - 2].first;
    return a >= top + ulp / 2 ? inf_bits : values.back().second;
  }
  if (hi == values.begin() || hi->first == a) return hi->second;
  const auto lo = hi - 1;
  const double dlo = a - lo->first, dhi = hi->first - a;
  if (dlo < dhi) return lo->second;
  if (dhi < dlo) return hi->second;
  return (lo->second & 1) ? hi->second : lo->second;
}

TEST(Half, DecodesEveryBitPatternLikeTheFieldFormula) {
  for (uint32_t b = 0; b < 0x10000; ++b) {
    const double expected = decode_half_bits(static_cast<uint16_t>(b));
    const float got = to_float(half_t{static_cast<uint16_t>(b)});
    if (std::isnan(expected)) {
      EXPECT_TRUE(std::isnan(got)) << b;
    } else {
      EXPECT_EQ(static_cast<double>(got), expected) << b;
    }
  }
}

TEST(Bf16, DecodesEveryBitPatternLikeTheFieldFormula) {
  for (uint32_t b = 0; b < 0x10000; ++b) {
    const double expected = decode_bf16_bits(static_cast<uint16_t>(b));
    const float got = to_float(bf16_t{static_cast<uint16_t>(b)});
    if (std::isnan(expected)) {
      EXPECT_TRUE(std::isnan(got)) << b;
    } else {
      EXPECT_EQ(static_cast<double>(got), expected) << b;
    }
  }
}

// Random floats over the whole half range (normals, subnormals, overflow), plus exact halfway
// points between neighbours, which exercise ties-to-even.
std::vector<float> probe_floats(const std::vector<std::pair<double, uint16_t>>& values,
                                double max_magnitude) {
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> log_mag(-30.0, std::log2(max_magnitude) + 1.0);
  std::vector<float> probes;
  for (int i = 0; i < 20000; ++i) {
    const float f = static_cast<float>(std::exp2(log_mag(rng)));
    probes.push_back(i % 2 ? f : -f);
  }
  for (size_t i = 1; i < values.size(); i += 97) {
    const double mid = (values[i - 1].first + values[i].first) / 2;
    if (static_cast<double>(static_cast<float>(mid)) == mid)
      probes.push_back(static_cast<float>(mid));
  }
  return probes;
}

TEST(Half, RoundsToNearestEvenEverywhere) {
  const auto values = finite_values(decode_half_bits);
  for (float f : probe_floats(values, 65504.0)) {
    const uint16_t mag = nearest(values, std::fabs(static_cast<double>(f)), 0x7c00);
    const uint16_t expected = static_cast<uint16_t>(mag | (std::signbit(f) ? 0x8000 : 0));
    EXPECT_EQ(to_half(f).bits, expected) << f;
  }
  EXPECT_TRUE(std::isnan(to_float(to_half(NAN))));
  EXPECT_EQ(to_half(INFINITY).bits, 0x7c00);
  EXPECT_EQ(to_half(-0.0f).bits, 0x8000);
}

TEST(Bf16, RoundsToNearestEvenEverywhere) {
  const auto values = finite_values(decode_bf16_bits);
  for (float f : probe_floats(values, 1e30)) {
    const uint16_t mag = nearest(values, std::fabs(static_cast<double>(f)), 0x7f80);
    const uint16_t expected = static_cast<uint16_t>(mag | (std::signbit(f) ? 0x8000 : 0));
    EXPECT_EQ(to_bf16(f).bits, expected) << f;
  }
  EXPECT_TRUE(std::isnan(to_float(to_bf16(NAN))));
  EXPECT_EQ(to_bf16(std::numeric_limits<float>::max()).bits, 0x7f80);  // rounds up to inf
}

TEST(DType, SizesAndNames) {
  EXPECT_EQ(size_of(DType::bf16), 2);
  EXPECT_EQ(size_of(DType::f64), 8);
  EXPECT_EQ(size_of(DType::u8), 1);
  EXPECT_EQ(name(DType::bf16), "bf16");
}

}  // namespace
}  // namespace qmoe
