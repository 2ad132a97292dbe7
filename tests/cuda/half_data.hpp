#pragma once
// Random bf16/f16 host data for the element-wise kernel tests, kept as raw 16-bit patterns with
// their exact values in double alongside.
#include <cstdint>
#include <random>
#include <vector>

#include "qmoe/dtype.hpp"

namespace qmoe::test {

struct HalfData {
  std::vector<uint16_t> bits;
  std::vector<double> values;  // exactly the values the bits encode
};

inline uint16_t half_bits(DType t, float v) {
  return t == DType::bf16 ? to_bf16(v).bits : to_half(v).bits;
}
inline double half_value(DType t, uint16_t bits) {
  return t == DType::bf16 ? to_float(bf16_t{bits}) : to_float(half_t{bits});
}

inline HalfData random_half(DType t, size_t n, std::mt19937_64& rng, float stddev) {
  std::normal_distribution<float> normal(0.0f, stddev);
  HalfData d;
  for (size_t i = 0; i < n; ++i) {
    d.bits.push_back(half_bits(t, normal(rng)));
    d.values.push_back(half_value(t, d.bits.back()));
  }
  return d;
}

// Half an ulp of the format, relative: the rounding of one result.
inline double half_ulp(DType t) { return t == DType::bf16 ? 1.0 / 256 : 1.0 / 2048; }
// Half the spacing of the format's subnormals: the absolute rounding error below the normal
// range (f16 results under 6.1e-5 are subnormal; bf16 shares f32's range).
inline double half_subnormal_step(DType t) { return t == DType::bf16 ? 0x1p-134 : 0x1p-25; }

}  // namespace qmoe::test
