// AVX-512 BF16 tile kernel for bf16 activations: vdpbf16ps does two multiply-adds per lane per
// instruction, twice the f32 FMA rate, and loses nothing here. Each 32-bit lane i holds the pair
// (k, k+1) of row i as bf16 codes: a code q <= 255 has at most 8 significant bits, so bf16
// holds it exactly and its products with bf16 activations are exact in f32. Per group:
//   out += s * (sum_k q_k x_k - z * sum_k x_k)
// 4-bit codes become bf16 through a 16-entry table (vpermw; e2m1 codes through a table of their
// values, exact in bf16, with no zero term), 8-bit ones through f32 (whose top 16 bits are then
// the bf16). Compiled with -mavx512f -mavx512bw -mavx512bf16 (CMakeLists.txt).
#include <immintrin.h>

#include "backend/cpu/avx512_e8m0.hpp"
#include "backend/cpu/panel_kernel.hpp"
#include "backend/cpu/tile_kernel.hpp"

namespace qmoe::cpu {
namespace {

// acc and the group's partial sums: 4 x 6 = 24 zmm, plus scales, zeros, table and weights.
constexpr int kMaxTokens = 6;

__m512i widen(const uint8_t* p) {
  return _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

// bf16 bit patterns of 0..15 (1.0 = 0x3f80, ...); vpermw reads 5 index bits, 16..31 unused.
alignas(64) constexpr uint16_t kNibbleBf16[32] = {0x0000, 0x3f80, 0x4000, 0x4040, 0x4080, 0x40a0,
                                                  0x40c0, 0x40e0, 0x4100, 0x4110, 0x4120, 0x4130,
                                                  0x4140, 0x4150, 0x4160, 0x4170};
// bf16 bit patterns of the e2m1 values: 0, 0.5, 1, 1.5, 2, 3, 4, 6, then their negatives.
alignas(64) constexpr uint16_t kE2m1Bf16[32] = {0x0000, 0x3f00, 0x3f80, 0x3fc0, 0x4000, 0x4040,
                                                0x4080, 0x40c0, 0x8000, 0xbf00, 0xbf80, 0xbfc0,
                                                0xc000, 0xc040, 0xc080, 0xc0c0};

// 16 bytes of 4-bit k-pairs -> lanes (bf16 low nibble, bf16 high nibble).
__m512bh nibble_pairs(const uint8_t* p, __m512i table) {
  const __m512i v = widen(p);
  // Index of the low 16 bits: v & 15; of the high 16 bits: (v >> 4) & 15, moved up by 16. One
  // vpternlogd computes (v | v << 12) & 0x000f000f (truth table 0xa8 = (A | B) & C).
  const __m512i index =
      _mm512_ternarylogic_epi32(v, _mm512_slli_epi32(v, 12), _mm512_set1_epi32(0x000f000f), 0xa8);
  return (__m512bh)_mm512_permutexvar_epi16(index, table);
}

// Two steps of 8-bit codes -> lanes (bf16 code at k, bf16 code at k + 1).
__m512bh byte_pairs(const uint8_t* even, const uint8_t* odd) {
  const __m512i even_bits =
      _mm512_srli_epi32(_mm512_castps_si512(_mm512_cvtepi32_ps(widen(even))), 16);
  const __m512i odd_bits = _mm512_castps_si512(_mm512_cvtepi32_ps(widen(odd)));
  // 0xAAAAAAAA: the high 16-bit half of every lane comes from odd_bits.
  return (__m512bh)_mm512_mask_blend_epi16(0xAAAAAAAAu, even_bits, odd_bits);
}

template <Codes C, bool ZeroPoints, int Tokens>
void tile(const PanelFormat& f, const PanelTileBf16& t) {
  constexpr int Bits = kCodeBits<C>;
  constexpr int64_t kHeader = panel_header_bytes(C == Codes::e2m1, ZeroPoints);
  constexpr int64_t kStep = kTileRows;  // bytes of codes per k-pair (4-bit) or k (int8)
  const int64_t G = f.group_k, pairs = G / 2;
  const int64_t group_bytes = kHeader + G * kTileRows * Bits / 8;
  const __m512i table = _mm512_load_si512(C == Codes::e2m1 ? kE2m1Bf16 : kNibbleBf16);
  __m512 acc[Tokens][2];
  for (int i = 0; i < Tokens; ++i) acc[i][0] = acc[i][1] = _mm512_setzero_ps();

  for (int64_t g = 0; g < f.groups; ++g) {
    const uint8_t* head = t.panel + g * group_bytes;
    const uint8_t* codes = head + kHeader;
    const uint32_t* x[Tokens];  // bf16 pairs (k, k+1), little endian: k in the low half
    for (int i = 0; i < Tokens; ++i) x[i] = reinterpret_cast<const uint32_t*>(t.x[i] + g * G);
    // With one or two tokens, two panels give too few independent dot-product chains to hide
    // the instruction's latency: even and odd k-pairs then sum separately (decode ran at 21 GB/s
    // per core from L2 with one chain per panel).
    constexpr int kSplit = Tokens <= 2 ? 2 : 1;
    __m512 part[Tokens][2][kSplit];
    for (int i = 0; i < Tokens; ++i)
      for (int p = 0; p < 2; ++p)
        for (int h = 0; h < kSplit; ++h) part[i][p][h] = _mm512_setzero_ps();

    // k-pair j of both panels into partial sum h (a constant once inlined).
    auto step = [&](int64_t j, int h) {
      const uint8_t* at = codes + (Bits == 4 ? j : 2 * j) * kStep;  // this k-pair's codes
      if (Bits == 8 || j % 2 == 0)
        _mm_prefetch(reinterpret_cast<const char*>(at + kPrefetchBytes), _MM_HINT_T0);
      for (int p = 0; p < 2; ++p) {
        __m512bh w;
        if constexpr (Bits == 4) {
          w = nibble_pairs(at + p * kHalfRows, table);
        } else {
          w = byte_pairs(at + p * kHalfRows, at + kStep + p * kHalfRows);
        }
        for (int i = 0; i < Tokens; ++i)
          part[i][p][h] = _mm512_dpbf16_ps(part[i][p][h], w, (__m512bh)_mm512_set1_epi32(x[i][j]));
      }
    };
    int64_t j = 0;
    for (; j + 1 < pairs; j += 2) {
      step(j, 0);
      step(j + 1, kSplit - 1);
    }
    if (j < pairs) step(j, 0);
    for (int p = 0; p < 2; ++p) {
      const __m512 s = C == Codes::e2m1
                           ? e8m0_scales(head + p * kHalfRows)
                           : _mm512_loadu_ps(reinterpret_cast<const float*>(head) + p * kHalfRows);
      const __m512 z = ZeroPoints ? _mm512_cvtepi32_ps(widen(head + kTileRows * 4 + p * kHalfRows))
                                  : _mm512_set1_ps(kImplicitZero<C>);
      for (int i = 0; i < Tokens; ++i) {
        __m512 sum = part[i][p][0];
        if constexpr (kSplit == 2) sum = _mm512_add_ps(sum, part[i][p][1]);
        const __m512 centered = _mm512_fnmadd_ps(z, _mm512_set1_ps(t.group_sum[i][g]), sum);
        acc[i][p] = _mm512_fmadd_ps(centered, s, acc[i][p]);
      }
    }
  }
  for (int i = 0; i < Tokens; ++i)
    for (int p = 0; p < 2; ++p) _mm512_storeu_ps(t.out + i * kTileRows + p * kHalfRows, acc[i][p]);
}

template <Codes C, bool ZeroPoints, int Tokens = 1>
void for_tokens(const PanelFormat& f, const PanelTileBf16& t) {
  if constexpr (Tokens < kMaxTokens) {
    if (t.tokens > Tokens) return for_tokens<C, ZeroPoints, Tokens + 1>(f, t);
  }
  tile<C, ZeroPoints, Tokens>(f, t);
}

void run(const PanelFormat& f, const PanelTileBf16& t) {
  if (f.e2m1) return for_tokens<Codes::e2m1, false>(f, t);
  if (f.bits == 4) {
    if (f.zero_points) return for_tokens<Codes::uint4, true>(f, t);
    return for_tokens<Codes::uint4, false>(f, t);
  }
  if (f.zero_points) return for_tokens<Codes::uint8, true>(f, t);
  for_tokens<Codes::uint8, false>(f, t);
}

}  // namespace

TileKernel tile_kernel_avx512_bf16() {
  TileKernel k = tile_kernel_avx512();
  k.isa = Isa::avx512_bf16;
  k.max_tokens_bf16 = kMaxTokens;
  k.run_bf16 = &run;
  return k;
}

}  // namespace qmoe::cpu
