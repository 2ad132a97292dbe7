#include "qmoe/dtype.hpp"

namespace qmoe {

std::string_view name(DType t) {
  switch (t) {
    case DType::f64: return "f64";
    case DType::f32: return "f32";
    case DType::f16: return "f16";
    case DType::bf16: return "bf16";
    case DType::i64: return "i64";
    case DType::i32: return "i32";
    case DType::i16: return "i16";
    case DType::i8: return "i8";
    case DType::u8: return "u8";
    case DType::u16: return "u16";
    case DType::u32: return "u32";
  }
  return "?";
}

// binary16: 1 sign, 5 exponent (bias 15), 10 mantissa bits. Rounds to nearest even in every
// range, including the subnormal one (values below 2^-14).
half_t to_half(float f) {
  const uint32_t u = std::bit_cast<uint32_t>(f);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t abs = u & 0x7fffffffu;
  if (abs > 0x7f800000u) return half_t{static_cast<uint16_t>(sign | 0x7e00u)};   // NaN
  if (abs >= 0x477ff000u) return half_t{static_cast<uint16_t>(sign | 0x7c00u)};  // >= 65520: inf
  if (abs >= 0x38800000u) {  // normal half (>= 2^-14)
    const uint32_t rounded = abs + 0x0fffu + ((abs >> 13) & 1u);
    return half_t{static_cast<uint16_t>(sign | ((rounded - 0x38000000u) >> 13))};
  }
  if (abs < 0x33000000u) return half_t{sign};  // < 2^-25 rounds to zero
  // Subnormal: value = mantissa * 2^-24. Shift the full 24-bit significand into place.
  const uint32_t exponent = abs >> 23;
  const uint32_t significand = (abs & 0x7fffffu) | 0x800000u;
  const uint32_t shift = 126u - exponent;  // 14 + 24 - 1 - (exponent - 127)
  uint32_t half_mant = significand >> shift;
  const uint32_t remainder = significand & ((1u << shift) - 1u);
  const uint32_t halfway = 1u << (shift - 1u);
  if (remainder > halfway || (remainder == halfway && (half_mant & 1u))) ++half_mant;
  return half_t{static_cast<uint16_t>(sign | half_mant)};
}

float to_float(half_t h) {
  const uint32_t sign = static_cast<uint32_t>(h.bits & 0x8000u) << 16;
  const uint32_t exponent = (h.bits >> 10) & 0x1fu;
  uint32_t mantissa = h.bits & 0x3ffu;
  if (exponent == 0x1f) return std::bit_cast<float>(sign | 0x7f800000u | (mantissa << 13));
  if (exponent != 0)
    return std::bit_cast<float>(sign | ((exponent + 112u) << 23) | (mantissa << 13));
  if (mantissa == 0) return std::bit_cast<float>(sign);
  // Subnormal half: normalise into a float.
  uint32_t e = 113;
  while ((mantissa & 0x400u) == 0) {
    mantissa <<= 1;
    --e;
  }
  return std::bit_cast<float>(sign | (e << 23) | ((mantissa & 0x3ffu) << 13));
}

}  // namespace qmoe
