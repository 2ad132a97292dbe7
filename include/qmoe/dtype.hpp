#pragma once
// Element types and the 16-bit float conversions used everywhere on the host.
#include <bit>
#include <cstdint>
#include <cstring>
#include <string_view>

namespace qmoe {

enum class DType : uint8_t { f64, f32, f16, bf16, i64, i32, i16, i8, u8, u16, u32 };

constexpr int64_t size_of(DType t) {
  switch (t) {
    case DType::f64:
    case DType::i64: return 8;
    case DType::f32:
    case DType::i32:
    case DType::u32: return 4;
    case DType::f16:
    case DType::bf16:
    case DType::i16:
    case DType::u16: return 2;
    case DType::i8:
    case DType::u8: return 1;
  }
  return 0;
}

std::string_view name(DType t);

// IEEE binary16 and bfloat16 storage types: plain bit containers, converted explicitly.
struct half_t {
  uint16_t bits;
};
struct bf16_t {
  uint16_t bits;
};

// float -> bfloat16 with round-to-nearest-even; NaN stays a (quiet) NaN, overflow rounds to inf.
inline bf16_t to_bf16(float f) {
  uint32_t u = std::bit_cast<uint32_t>(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return bf16_t{static_cast<uint16_t>((u >> 16) | 0x0040u)};
  const uint32_t rounding_bias = 0x7fffu + ((u >> 16) & 1u);
  return bf16_t{static_cast<uint16_t>((u + rounding_bias) >> 16)};
}
inline float to_float(bf16_t b) {
  return std::bit_cast<float>(static_cast<uint32_t>(b.bits) << 16);
}

// float -> IEEE half with round-to-nearest-even, subnormals and inf/NaN handled.
half_t to_half(float f);
float to_float(half_t h);

template <class T>
constexpr DType dtype_of();
template <>
constexpr DType dtype_of<double>() {
  return DType::f64;
}
template <>
constexpr DType dtype_of<float>() {
  return DType::f32;
}
template <>
constexpr DType dtype_of<half_t>() {
  return DType::f16;
}
template <>
constexpr DType dtype_of<bf16_t>() {
  return DType::bf16;
}
template <>
constexpr DType dtype_of<int64_t>() {
  return DType::i64;
}
template <>
constexpr DType dtype_of<int32_t>() {
  return DType::i32;
}
template <>
constexpr DType dtype_of<int8_t>() {
  return DType::i8;
}
template <>
constexpr DType dtype_of<uint8_t>() {
  return DType::u8;
}
template <>
constexpr DType dtype_of<uint16_t>() {
  return DType::u16;
}
template <>
constexpr DType dtype_of<uint32_t>() {
  return DType::u32;
}

}  // namespace qmoe
