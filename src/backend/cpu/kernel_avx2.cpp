// AVX2 + FMA tile kernel: 16 rows are two ymm. Compiled with -mavx2 -mfma (CMakeLists.txt).
#include <immintrin.h>

#include "backend/cpu/avx2_e8m0.hpp"
#include "backend/cpu/kernel_avx2_e2m1.hpp"
#include "backend/cpu/panel_kernel.hpp"
#include "backend/cpu/tile_kernel.hpp"

namespace qmoe::cpu {
namespace {

// e2m1 magnitudes (0, 0.5, 1, 1.5, 2, 3, 4, 6) as f32 bits, each XORed with its index i << 28.
// A lane holding nibble q (bits 3..0) then becomes its value in three instructions:
// vpermps reads only the index's low 3 bits (the magnitude), and XOR with q << 28 restores bits
// 30..28 while moving q's sign bit 3 to bit 31.
alignas(32) constexpr uint32_t kE2m1Folded[8] = {0x00000000, 0x2f000000, 0x1f800000, 0x0fc00000,
                                                 0x00000000, 0x10400000, 0x20800000, 0x30c00000};

struct Simd {
  struct Rows {
    __m256 v[2];
  };
  // 4 tokens x 2 ymm of partial sums, plus 4 ymm of converted codes, the nibble mask and a
  // broadcast activation: 15 of the 16 ymm registers; more tokens spill.
  static constexpr int kMaxTokens = 4;

  static Rows splat(float f) { return {{_mm256_set1_ps(f), _mm256_set1_ps(f)}}; }
  static Rows zero() { return {{_mm256_setzero_ps(), _mm256_setzero_ps()}}; }
  static Rows load(const float* p) { return {{_mm256_loadu_ps(p), _mm256_loadu_ps(p + 8)}}; }
  static __m256i widen8(const uint8_t* p) {
    return _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
  }
  static Rows load_u8(const uint8_t* p) {
    return {{_mm256_cvtepi32_ps(widen8(p)), _mm256_cvtepi32_ps(widen8(p + 8))}};
  }
  static Rows add(Rows a, Rows b) {
    return {{_mm256_add_ps(a.v[0], b.v[0]), _mm256_add_ps(a.v[1], b.v[1])}};
  }
  static Rows mul_add(Rows a, Rows b, Rows c) {
    return {{_mm256_fmadd_ps(a.v[0], b.v[0], c.v[0]), _mm256_fmadd_ps(a.v[1], b.v[1], c.v[1])}};
  }
  static void codes4(const uint8_t* p, Rows& lo, Rows& hi) {
    const __m256i mask = _mm256_set1_epi32(0x0f);
    for (int h = 0; h < 2; ++h) {
      const __m256i q = widen8(p + 8 * h);
      lo.v[h] = _mm256_cvtepi32_ps(_mm256_and_si256(q, mask));
      hi.v[h] = _mm256_cvtepi32_ps(_mm256_srli_epi32(q, 4));
    }
  }
  static __m256 e2m1_value(__m256i q, __m256 table) {
    return _mm256_xor_ps(_mm256_permutevar8x32_ps(table, q),
                         _mm256_castsi256_ps(_mm256_slli_epi32(q, 28)));
  }
  static void e2m1_codes4(const uint8_t* p, Rows& lo, Rows& hi) {
    const __m256 table = _mm256_load_ps(reinterpret_cast<const float*>(kE2m1Folded));
    for (int h = 0; h < 2; ++h) {
      const __m256i q = widen8(p + 8 * h);  // bits 7..4 of q leave the lane in q << 28
      lo.v[h] = e2m1_value(q, table);
      hi.v[h] = e2m1_value(_mm256_srli_epi32(q, 4), table);
    }
  }
  static Rows codes8(const uint8_t* p) { return load_u8(p); }
  static Rows e8m0(const uint8_t* p) { return {{e8m0_scales(p), e8m0_scales(p + 8)}}; }
  static Rows fma(Rows w, float x, Rows acc) {
    const __m256 b = _mm256_set1_ps(x);
    return {{_mm256_fmadd_ps(w.v[0], b, acc.v[0]), _mm256_fmadd_ps(w.v[1], b, acc.v[1])}};
  }
  static void store(float* p, Rows r) {
    _mm256_storeu_ps(p, r.v[0]);
    _mm256_storeu_ps(p + 8, r.v[1]);
  }
  static void prefetch(const uint8_t* p) {
    _mm_prefetch(reinterpret_cast<const char*>(p), _MM_HINT_T0);
  }
};

// MXFP4 tiles of one or two tokens take the vpshufb conversion (kernel_avx2_e2m1.cpp); with more
// tokens the lane-by-lane lookup above costs less, since it converts the codes once for all four
// tokens where the other would convert them once per two.
void run(const PanelFormat& format, const PanelTile& tile) {
  if (format.e2m1 && tile.tokens <= kE2m1Avx2MaxTokens) return e2m1_tile_avx2(format, tile);
  run_panel_tile<Simd>(format, tile);
}

}  // namespace

TileKernel tile_kernel_avx2() { return {Isa::avx2, Simd::kMaxTokens, &run}; }

}  // namespace qmoe::cpu
