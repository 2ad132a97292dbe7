#pragma once
// MXFP4: e2m1 elements (1 sign, 2 exponent, 1 mantissa bit) with one e8m0 scale per 32 values.
#include <cmath>
#include <cstdint>

namespace qmoe {

// Magnitudes of the 8 non-negative e2m1 codes; bit 3 is the sign.
inline float e2m1_to_float(int code) {
  static constexpr float kMagnitude[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  const float m = kMagnitude[code & 7];
  return (code & 8) ? -m : m;
}

// e8m0: value 2^(s - 127); 0xff is NaN.
inline float e8m0_to_float(uint8_t s) {
  return s == 0xff ? NAN : std::ldexp(1.0f, static_cast<int>(s) - 127);
}

// Nearest e2m1 code to x (ties to the even code), saturating at +-6.
int float_to_e2m1(float x);

}  // namespace qmoe
