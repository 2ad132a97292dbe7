#pragma once
// MXFP4: e2m1 elements (1 sign, 2 exponent, 1 mantissa bit) with one e8m0 scale per 32 values.
#include <cmath>
#include <cstdint>
#include <span>

#include "qmoe/quant.hpp"

namespace qmoe {

inline constexpr int kMxBlock = 32;  // values sharing one e8m0 scale

// Magnitudes of the 8 non-negative e2m1 codes; bit 3 is the sign.
inline float e2m1_to_float(int code) {
  static constexpr float kMagnitude[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  const float m = kMagnitude[code & 7];
  return (code & 8) ? -m : m;
}

// e8m0: value 2^(s - 127); 0xff is NaN. Canonical weights never hold the NaN code
// (QuantizedWeight::validate refuses it), so every weight scale a backend sees is finite.
inline constexpr uint8_t kE8m0Nan = 0xff;
// The valid scales, for the messages that refuse kE8m0Nan.
inline constexpr const char* kE8m0Valid = "valid: 0x00..0xfe, the powers of two 2^-127..2^127";

inline float e8m0_to_float(uint8_t s) {
  return s == kE8m0Nan ? NAN : std::ldexp(1.0f, static_cast<int>(s) - 127);
}

// Nearest e2m1 code to x (ties to the even code), saturating at +-6. Exact for float and double.
int float_to_e2m1(double x);

// Quantizes activations to MXFP4 and back, in place, block by block of 32 consecutive values (the
// K axis of the GEMM they enter), each block's scale chosen by `rule` (mxfp4 or mxfp4_even): what
// a W4A4 GEMM sees. values.size() must be a multiple of 32.
template <class T>
void mxfp4_quantize_dequantize(std::span<T> values, ActivationQuant rule);

}  // namespace qmoe
