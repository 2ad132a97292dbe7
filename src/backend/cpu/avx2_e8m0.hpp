#pragma once
// e8m0 scale bytes -> f32 scales on AVX2, for the two AVX2 kernel files. Internal linkage (an
// anonymous namespace), like each kernel's Simd: code compiled for AVX2 must never be what the
// linker picks for a caller on a lesser CPU.
#include <immintrin.h>

#include <cstdint>

#include "backend/cpu/panel_kernel.hpp"

namespace qmoe::cpu {
namespace {

// 8 e8m0 bytes -> their scales 2^(e - 127) (panel_kernel.hpp: kE8m0Shift, kE8m0ZeroBits).
inline __m256 e8m0_scales(const uint8_t* p) {
  const __m256i e = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
  return _mm256_castsi256_ps(
      _mm256_max_epi32(_mm256_slli_epi32(e, kE8m0Shift), _mm256_set1_epi32(kE8m0ZeroBits)));
}

}  // namespace
}  // namespace qmoe::cpu
