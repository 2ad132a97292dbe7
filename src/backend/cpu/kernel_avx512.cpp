// AVX-512 tile kernel: 16 rows are one zmm. Compiled with -mavx512f -mavx512bw (CMakeLists.txt).
#include <immintrin.h>

#include "backend/cpu/panel_kernel.hpp"
#include "backend/cpu/tile_kernel.hpp"

namespace qmoe::cpu {
namespace {

struct Simd {
  using Rows = __m512;
  // 8 tokens x 2 panels = 16 accumulators, plus scales, zero terms and dequantized weights:
  // about 24 of the 32 zmm registers.
  static constexpr int kMaxTokens = 8;

  static Rows splat(float f) { return _mm512_set1_ps(f); }
  static Rows zero() { return _mm512_setzero_ps(); }
  static Rows load(const float* p) { return _mm512_loadu_ps(p); }
  static __m512i widen(const uint8_t* p) {
    return _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  static Rows load_u8(const uint8_t* p) { return _mm512_cvtepi32_ps(widen(p)); }
  static Rows mul(Rows a, Rows b) { return _mm512_mul_ps(a, b); }
  static void dequant4(const uint8_t* p, Rows s, Rows zs, Rows& lo, Rows& hi) {
    const __m512i q = widen(p);
    lo = _mm512_fmsub_ps(_mm512_cvtepi32_ps(_mm512_and_si512(q, _mm512_set1_epi32(0x0f))), s, zs);
    hi = _mm512_fmsub_ps(_mm512_cvtepi32_ps(_mm512_srli_epi32(q, 4)), s, zs);
  }
  static Rows dequant8(const uint8_t* p, Rows s, Rows zs) {
    return _mm512_fmsub_ps(_mm512_cvtepi32_ps(widen(p)), s, zs);
  }
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
