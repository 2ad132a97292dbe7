#pragma once
// The one tile kernel body shared by every ISA (see panel_format.hpp for the layout). Each
// kernel_<isa>.cpp defines a `Simd` struct in an anonymous namespace and instantiates
// run_panel_tile<Simd>; because Simd has internal linkage, so has every instantiation, and code
// compiled for AVX-512 can never be picked by the linker for a caller on a lesser CPU. For the
// same reason this header calls nothing but Simd's members (no std functions, no inline members
// of qmoe types).
//
// Simd provides, for 16 float lanes `Rows`:
//   kMaxTokens, zero(), splat(f), load(const float*), load_u8(const uint8_t*), mul(a, b),
//   dequant4(p, s, zs, lo, hi)  16 bytes -> low/high nibbles as (q * s - zs)
//   dequant8(p, s, zs)          16 bytes -> (q * s - zs)
//   fma(w, x, acc)              acc + w * x (x broadcast)
//   store(float*, Rows)
//   prefetch(const uint8_t*)    a hint to bring one cache line towards L1
#include "backend/cpu/panel_format.hpp"

namespace qmoe::cpu {

// Software prefetch distance along a panel stream. Panels are short (6-17 KB for Qwen3-sized
// experts) and two are read at once, so the hardware prefetcher alone leaves a single core well
// below its DRAM read rate; one line per 64 bytes of codes, this far ahead, keeps enough misses
// in flight. Measured on one thread, Qwen3 M=16 (200 MB per forward), together with the 64 KB
// work items of cpu_forward.cpp: 21 ms before both, 14-15 ms at 1-2 KB, 17 ms at 512 B, 16 ms
// at 4 KB.
inline constexpr int64_t kPrefetchBytes = 2048;

// With one or two tokens, the two panels alone give too few independent FMA chains to hide the
// FMA latency, so even and odd k accumulate separately and are summed at the end.
template <class Simd, int Bits, bool ZeroPoints, int Tokens>
void panel_tile(const PanelFormat& f, const PanelTile& tile) {
  using Rows = typename Simd::Rows;
  constexpr int kSplit = Tokens <= 2 ? 2 : 1;
  constexpr int64_t kHeader = kPanelRows * 4 + (ZeroPoints ? kPanelRows : 0);
  const int64_t G = f.group_k;
  const int64_t group_bytes = kHeader + G * kPanelRows * Bits / 8;
  const Rows implicit_zero = Simd::splat(static_cast<float>(1 << (Bits - 1)));

  Rows acc[Tokens][2][kSplit];
  for (int t = 0; t < Tokens; ++t)
    for (int p = 0; p < 2; ++p)
      for (int h = 0; h < kSplit; ++h) acc[t][p][h] = Simd::zero();

  for (int64_t g = 0; g < f.groups; ++g) {
    Rows s[2], zs[2];
    const uint8_t* codes[2];
    for (int p = 0; p < 2; ++p) {
      const uint8_t* head = tile.panel[p] + g * group_bytes;
      s[p] = Simd::load(reinterpret_cast<const float*>(head));
      const Rows z = ZeroPoints ? Simd::load_u8(head + kPanelRows * 4) : implicit_zero;
      zs[p] = Simd::mul(z, s[p]);
      codes[p] = head + kHeader;
    }
    const float* x[Tokens];
    for (int t = 0; t < Tokens; ++t) x[t] = tile.x[t] + g * G;

    if constexpr (Bits == 4) {
      for (int64_t j = 0; j < G / 2; ++j) {
        for (int p = 0; p < 2; ++p) {
          if (j % 4 == 0) Simd::prefetch(codes[p] + j * kPanelRows + kPrefetchBytes);
          Rows lo, hi;
          Simd::dequant4(codes[p] + j * kPanelRows, s[p], zs[p], lo, hi);
          for (int t = 0; t < Tokens; ++t) {
            acc[t][p][0] = Simd::fma(lo, x[t][2 * j], acc[t][p][0]);
            acc[t][p][kSplit - 1] = Simd::fma(hi, x[t][2 * j + 1], acc[t][p][kSplit - 1]);
          }
        }
      }
    } else {
      int64_t k = 0;
      for (; k + 1 < G; k += 2) {
        for (int p = 0; p < 2; ++p) {
          if (k % 4 == 0) Simd::prefetch(codes[p] + k * kPanelRows + kPrefetchBytes);
          const Rows w0 = Simd::dequant8(codes[p] + k * kPanelRows, s[p], zs[p]);
          const Rows w1 = Simd::dequant8(codes[p] + (k + 1) * kPanelRows, s[p], zs[p]);
          for (int t = 0; t < Tokens; ++t) {
            acc[t][p][0] = Simd::fma(w0, x[t][k], acc[t][p][0]);
            acc[t][p][kSplit - 1] = Simd::fma(w1, x[t][k + 1], acc[t][p][kSplit - 1]);
          }
        }
      }
      if (k < G) {
        for (int p = 0; p < 2; ++p) {
          const Rows w = Simd::dequant8(codes[p] + k * kPanelRows, s[p], zs[p]);
          for (int t = 0; t < Tokens; ++t) acc[t][p][0] = Simd::fma(w, x[t][k], acc[t][p][0]);
        }
      }
    }
  }

  for (int t = 0; t < Tokens; ++t)
    for (int p = 0; p < 2; ++p) {
      Rows sum = acc[t][p][0];
      if constexpr (kSplit == 2) sum = Simd::fma(acc[t][p][1], 1.0f, sum);
      Simd::store(tile.out + t * kTileRows + p * kPanelRows, sum);
    }
}

template <class Simd, int Bits, bool ZeroPoints, int Tokens = 1>
void panel_tile_for_tokens(const PanelFormat& f, const PanelTile& tile) {
  if constexpr (Tokens < Simd::kMaxTokens) {
    if (tile.tokens > Tokens)
      return panel_tile_for_tokens<Simd, Bits, ZeroPoints, Tokens + 1>(f, tile);
  }
  panel_tile<Simd, Bits, ZeroPoints, Tokens>(f, tile);
}

template <class Simd>
void run_panel_tile(const PanelFormat& f, const PanelTile& tile) {
  if (f.bits == 4) {
    if (f.zero_points) return panel_tile_for_tokens<Simd, 4, true>(f, tile);
    return panel_tile_for_tokens<Simd, 4, false>(f, tile);
  }
  if (f.zero_points) return panel_tile_for_tokens<Simd, 8, true>(f, tile);
  panel_tile_for_tokens<Simd, 8, false>(f, tile);
}

}  // namespace qmoe::cpu
