// AVX-512 tile kernel: 16 rows are one zmm. Compiled with -mavx512f -mavx512bw (CMakeLists.txt).
#include <immintrin.h>

#include "backend/cpu/avx512_e8m0.hpp"
#include "backend/cpu/panel_kernel.hpp"
#include "backend/cpu/tile_kernel.hpp"

namespace qmoe::cpu {
namespace {

// 0..15 as floats: vpermps reads only the low 4 bits of each index lane, so a nibble becomes a
// float in one instruction without masking off the bits above it.
alignas(64) constexpr float kNibbles[16] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
// The same lookup for e2m1 codes: bit 3 is the sign, bits 2..0 index the magnitudes.
alignas(64) constexpr float kE2m1[16] = {0,     0.5f,  1,  1.5f,  2,  3,  4,  6,
                                         -0.0f, -0.5f, -1, -1.5f, -2, -3, -4, -6};

struct Simd {
  using Rows = __m512;
  // 16 tokens = 16 zmm of partial sums, plus the nibble table, codes and converted weights.
  static constexpr int kMaxTokens = 16;

  static Rows splat(float f) { return _mm512_set1_ps(f); }
  static Rows zero() { return _mm512_setzero_ps(); }
  static Rows load(const float* p) { return _mm512_loadu_ps(p); }
  static __m512i widen(const uint8_t* p) {
    return _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  static Rows load_u8(const uint8_t* p) { return _mm512_cvtepi32_ps(widen(p)); }
  static Rows add(Rows a, Rows b) { return _mm512_add_ps(a, b); }
  static Rows mul_add(Rows a, Rows b, Rows c) { return _mm512_fmadd_ps(a, b, c); }
  static void lookup4(const uint8_t* p, const float* values, Rows& lo, Rows& hi) {
    const __m512 table = _mm512_load_ps(values);
    const __m512i q = widen(p);
    lo = _mm512_permutexvar_ps(q, table);
    hi = _mm512_permutexvar_ps(_mm512_srli_epi32(q, 4), table);
  }
  static void codes4(const uint8_t* p, Rows& lo, Rows& hi) { lookup4(p, kNibbles, lo, hi); }
  static void e2m1_codes4(const uint8_t* p, Rows& lo, Rows& hi) { lookup4(p, kE2m1, lo, hi); }
  static Rows codes8(const uint8_t* p) { return load_u8(p); }
  static Rows e8m0(const uint8_t* p) { return e8m0_scales(p); }
  static Rows fma(Rows w, float x, Rows acc) { return _mm512_fmadd_ps(w, _mm512_set1_ps(x), acc); }
  static void store(float* p, Rows r) { _mm512_storeu_ps(p, r); }
  static void prefetch(const uint8_t* p) {
    _mm_prefetch(reinterpret_cast<const char*>(p), _MM_HINT_T0);
  }
};

void run(const PanelFormat& format, const PanelTile& tile) { run_panel_tile<Simd>(format, tile); }

}  // namespace

TileKernel tile_kernel_avx512() { return {Isa::avx512, Simd::kMaxTokens, &run}; }

}  // namespace qmoe::cpu
