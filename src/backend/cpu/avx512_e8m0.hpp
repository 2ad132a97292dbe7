#pragma once
// e8m0 scale bytes -> f32 scales on AVX-512, for the two AVX-512 kernel files. Internal linkage
// (an anonymous namespace), like each kernel's Simd: code compiled for AVX-512 must never be
// what the linker picks for a caller on a lesser CPU.
#include <immintrin.h>

#include <cstdint>

#include "backend/cpu/panel_kernel.hpp"

namespace qmoe::cpu {
namespace {

// 16 e8m0 bytes -> their scales 2^(e - 127) (panel_kernel.hpp: kE8m0Shift, kE8m0ZeroBits).
inline __m512 e8m0_scales(const uint8_t* p) {
  const __m512i e = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  const __m512i bits = _mm512_slli_epi32(e, kE8m0Shift);
  return _mm512_castsi512_ps(_mm512_max_epi32(bits, _mm512_set1_epi32(kE8m0ZeroBits)));
}

}  // namespace
}  // namespace qmoe::cpu
