// MXFP4 panels of one or two tokens on AVX2 + FMA (compiled with -mavx2 -mfma, CMakeLists.txt).
// AVX2 has no 16-entry float lookup: one vpermps reads 8 entries, so kernel_avx2.cpp's lane-by-lane
// lookup costs 4 instructions per 8 weights, and decode ran port-bound at ~55% of int4's bytes per
// second. Here vpshufb does the lookup on 32 codes at once, and the weights become f32 through
// bf16:
//
//   every e2m1 value is exact in bf16, and its f32 bits are its bf16 bits << 16. Two byte tables
//   (the bf16's low and high bytes, kLowBytes / kHighBytes) looked up by vpshufb and interleaved
//   by vpunpck{l,h}bw give 16-bit words, the bf16 of 8 rows per 128-bit lane. Of each 32-bit
//   lane (words 2d, 2d+1), `<< 16` is row 2d's f32 and `& 0xffff0000` row 2d+1's.
//
// Each step of half_group's loop covers 16 rows x 2 k-pairs: the 128-bit lanes hold k-pairs j
// and j+1 (two 16-byte loads), so one 32-bit lane of a converted vector is row r of k-pair j in
// the low 128 bits and of j+1 in the high ones, and the activations multiplying it are
// [x(k) x4 | x(k + 2) x4] (vpermilps of a 4-float broadcast). The sums keep this layout (rows
// 0,2,4,6 / 1,3,5,7 / 8,10,12,14 / 9,11,13,15, two k streams) until the end of the group, where
// rows_in_order() adds the streams and restores the row order. Counted per 64 weights: 20 vector
// instructions against 32 for the per-lane lookup; on a 2-core Zen 3 VM the loop alone ran
// 1.5-1.6x faster from L1 (bench/NOTES.md). It converts the codes once per call, so it takes one
// or two tokens; kernel_avx2.cpp keeps the lane-by-lane lookup for three and four.
#include "backend/cpu/kernel_avx2_e2m1.hpp"

#include <immintrin.h>

#include "backend/cpu/avx2_e8m0.hpp"
#include "backend/cpu/panel_kernel.hpp"

namespace qmoe::cpu {
namespace {

// The bf16 bytes of e2m1 code q (bit 3 sign, bits 2..0: 0, 0.5, 1, 1.5, 2, 3, 4, 6), repeated for
// vpshufb's two 128-bit lanes.
alignas(32) constexpr uint8_t kLowBytes[32] = {
    0x00, 0x00, 0x80, 0xc0, 0x00, 0x40, 0x80, 0xc0, 0x00, 0x00, 0x80, 0xc0, 0x00, 0x40, 0x80, 0xc0,
    0x00, 0x00, 0x80, 0xc0, 0x00, 0x40, 0x80, 0xc0, 0x00, 0x00, 0x80, 0xc0, 0x00, 0x40, 0x80, 0xc0};
alignas(32) constexpr uint8_t kHighBytes[32] = {
    0x00, 0x3f, 0x3f, 0x3f, 0x40, 0x40, 0x40, 0x40, 0x80, 0xbf, 0xbf, 0xbf, 0xc0, 0xc0, 0xc0, 0xc0,
    0x00, 0x3f, 0x3f, 0x3f, 0x40, 0x40, 0x40, 0x40, 0x80, 0xbf, 0xbf, 0xbf, 0xc0, 0xc0, 0xc0, 0xc0};

struct Tables {
  __m256i low = _mm256_load_si256(reinterpret_cast<const __m256i*>(kLowBytes));
  __m256i high = _mm256_load_si256(reinterpret_cast<const __m256i*>(kHighBytes));
  __m256i nibble = _mm256_set1_epi8(0x0f);
  __m256i high_word = _mm256_set1_epi32(int(0xffff0000u));
};

// Codes of one nibble position (4-bit indices in every byte) -> the 4 f32 vectors of 16 rows,
// in the interleaved row order described above.
[[gnu::always_inline]] inline void to_f32(__m256i index, const Tables& t, __m256 (&w)[4]) {
  const __m256i low = _mm256_shuffle_epi8(t.low, index), high = _mm256_shuffle_epi8(t.high, index);
  const __m256i rows0 = _mm256_unpacklo_epi8(low, high), rows8 = _mm256_unpackhi_epi8(low, high);
  w[0] = _mm256_castsi256_ps(_mm256_slli_epi32(rows0, 16));
  w[1] = _mm256_castsi256_ps(_mm256_and_si256(rows0, t.high_word));
  w[2] = _mm256_castsi256_ps(_mm256_slli_epi32(rows8, 16));
  w[3] = _mm256_castsi256_ps(_mm256_and_si256(rows8, t.high_word));
}

// The 4 sums of one token (interleaved rows, two k streams) -> rows 0..7 and 8..15 in order.
inline void rows_in_order(const __m256 (&sum)[4], __m256 (&rows)[2]) {
  for (int h = 0; h < 2; ++h) {
    const __m256 even = sum[2 * h], odd = sum[2 * h + 1];
    const __m256 lo = _mm256_unpacklo_ps(even, odd), hi = _mm256_unpackhi_ps(even, odd);
    rows[h] =
        _mm256_add_ps(_mm256_permute2f128_ps(lo, hi, 0x20), _mm256_permute2f128_ps(lo, hi, 0x31));
  }
}

// sum[t] += the 16 rows of `index`'s codes (two k-pairs, to_f32) x token t's activations at k
// and k + 2 (which_k picks them from x[t][k0..k0+3]).
template <int Tokens>
[[gnu::always_inline]] inline void accumulate(__m256i index, const Tables& t,
                                              const float* const (&x)[Tokens], int64_t k0,
                                              __m256i which_k, __m256 (&sum)[Tokens][4]) {
  __m256 w[4];
  to_f32(index, t, w);
  for (int i = 0; i < Tokens; ++i) {
    const __m256 x4 = _mm256_broadcast_ps(reinterpret_cast<const __m128*>(x[i] + k0));
    const __m256 xk = _mm256_permutevar_ps(x4, which_k);
    for (int r = 0; r < 4; ++r) sum[i][r] = _mm256_fmadd_ps(w[r], xk, sum[i][r]);
  }
}

// out[t] += scale * (half `half` of group `g`) for every token. One token keeps even and odd k in
// separate sums so that 8 FMA chains hide the FMA latency.
template <int Tokens>
void half_group(const PanelFormat& f, const PanelTile& tile, const Tables& t, int64_t g, int half) {
  constexpr int kSplit = Tokens == 1 ? 2 : 1;
  const uint8_t* head = tile.panel + g * f.group_bytes();
  const uint8_t* at = head + f.header_bytes() + half * kHalfRows;
  const float* x[Tokens];
  for (int i = 0; i < Tokens; ++i) x[i] = tile.x[i] + g * f.group_k;
  __m256 sum[kSplit][Tokens][4];
  for (int s = 0; s < kSplit; ++s)
    for (int i = 0; i < Tokens; ++i)
      for (int r = 0; r < 4; ++r) sum[s][i][r] = _mm256_setzero_ps();

  // e2m1 groups are MXFP4 blocks of 32 k (QuantScheme validation): 16 k-pairs, two per step.
  const __m256i even_k = _mm256_setr_epi32(0, 0, 0, 0, 2, 2, 2, 2);
  const __m256i odd_k = _mm256_setr_epi32(1, 1, 1, 1, 3, 3, 3, 3);
  for (int64_t j = 0; j < f.group_k / 2; j += 2) {
    const uint8_t* p = at + j * kTileRows;
    if (half == 0) _mm_prefetch(reinterpret_cast<const char*>(p + kPrefetchBytes), _MM_HINT_T0);
    const __m256i bytes = _mm256_inserti128_si256(
        _mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))),
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + kTileRows)), 1);
    const __m256i low = _mm256_and_si256(bytes, t.nibble);
    const __m256i high = _mm256_and_si256(_mm256_srli_epi16(bytes, 4), t.nibble);
    accumulate<Tokens>(low, t, x, 2 * j, even_k, sum[0]);  // low nibbles: even k
    accumulate<Tokens>(high, t, x, 2 * j, odd_k, sum[kSplit - 1]);
  }

  const __m256 scale[2] = {e8m0_scales(head + half * kHalfRows),
                           e8m0_scales(head + half * kHalfRows + 8)};
  for (int i = 0; i < Tokens; ++i) {
    if constexpr (kSplit == 2)
      for (int r = 0; r < 4; ++r) sum[0][i][r] = _mm256_add_ps(sum[0][i][r], sum[1][i][r]);
    __m256 rows[2];
    rows_in_order(sum[0][i], rows);
    float* out = tile.out + i * kTileRows + half * kHalfRows;
    for (int h = 0; h < 2; ++h)
      _mm256_storeu_ps(out + 8 * h,
                       _mm256_fmadd_ps(scale[h], rows[h], _mm256_loadu_ps(out + 8 * h)));
  }
}

}  // namespace

void e2m1_tile_avx2(const PanelFormat& f, const PanelTile& tile) {
  const Tables t;
  for (int i = 0; i < tile.tokens * kTileRows; ++i) tile.out[i] = 0.0f;
  for (int64_t g = 0; g < f.groups; ++g)
    for (int half = 0; half < 2; ++half) {
      if (tile.tokens == 1) {
        half_group<1>(f, tile, t, g, half);
      } else {
        half_group<2>(f, tile, t, g, half);
      }
    }
}

}  // namespace qmoe::cpu
