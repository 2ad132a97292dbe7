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

// Software prefetch distance along a panel stream: one line per 64 bytes of codes, this far
// ahead. Panels are short (13-70 KB) and each thread reads one stream, so the hardware
// prefetcher alone leaves a core well below its DRAM read rate, and this VM's memory latency is
// high. Measured with bench_cpu_moe --cpu-only (2 threads, one stream per panel; single samples
// on a noisy VM), fraction of the same-run read ceiling: Qwen3 M=16 0.58 at 2 KB, 0.58 at 4 KB,
// 0.66 at 8 KB, 0.67 at 16 KB, 0.66 at 32 KB; Mixtral-half M=1 0.47, 0.70, 0.72, 0.74, 0.77.
inline constexpr int64_t kPrefetchBytes = 16384;

// With one or two tokens, the two panels alone give too few independent FMA chains to hide the
// FMA latency, so even and odd k accumulate separately and are summed at the end.
template <class Simd, int Bits, bool ZeroPoints, int Tokens>
void panel_tile(const PanelFormat& f, const PanelTile& tile) {
  using Rows = typename Simd::Rows;
  constexpr int kSplit = Tokens <= 2 ? 2 : 1;
  constexpr int64_t kHeader = kTileRows * 4 + (ZeroPoints ? kTileRows : 0);
  constexpr int64_t kStep = kTileRows;  // bytes of codes per k step (int8) or k-pair (int4)
  const int64_t G = f.group_k;
  const int64_t group_bytes = kHeader + G * kTileRows * Bits / 8;
  const Rows implicit_zero = Simd::splat(static_cast<float>(1 << (Bits - 1)));

  Rows acc[Tokens][2][kSplit];
  for (int t = 0; t < Tokens; ++t)
    for (int p = 0; p < 2; ++p)
      for (int h = 0; h < kSplit; ++h) acc[t][p][h] = Simd::zero();

  for (int64_t g = 0; g < f.groups; ++g) {
    Rows s[2], zs[2];
    const uint8_t* head = tile.panel + g * group_bytes;
    const uint8_t* codes = head + kHeader;
    for (int p = 0; p < 2; ++p) {
      s[p] = Simd::load(reinterpret_cast<const float*>(head) + p * kHalfRows);
      const Rows z =
          ZeroPoints ? Simd::load_u8(head + kTileRows * 4 + p * kHalfRows) : implicit_zero;
      zs[p] = Simd::mul(z, s[p]);
    }
    const float* x[Tokens];
    for (int t = 0; t < Tokens; ++t) x[t] = tile.x[t] + g * G;

    if constexpr (Bits == 4) {
      for (int64_t j = 0; j < G / 2; ++j) {
        if (j % 2 == 0) Simd::prefetch(codes + j * kStep + kPrefetchBytes);
        for (int p = 0; p < 2; ++p) {
          Rows lo, hi;
          Simd::dequant4(codes + j * kStep + p * kHalfRows, s[p], zs[p], lo, hi);
          for (int t = 0; t < Tokens; ++t) {
            acc[t][p][0] = Simd::fma(lo, x[t][2 * j], acc[t][p][0]);
            acc[t][p][kSplit - 1] = Simd::fma(hi, x[t][2 * j + 1], acc[t][p][kSplit - 1]);
          }
        }
      }
    } else {
      int64_t k = 0;
      for (; k + 1 < G; k += 2) {
        Simd::prefetch(codes + k * kStep + kPrefetchBytes);
        for (int p = 0; p < 2; ++p) {
          const Rows w0 = Simd::dequant8(codes + k * kStep + p * kHalfRows, s[p], zs[p]);
          const Rows w1 = Simd::dequant8(codes + (k + 1) * kStep + p * kHalfRows, s[p], zs[p]);
          for (int t = 0; t < Tokens; ++t) {
            acc[t][p][0] = Simd::fma(w0, x[t][k], acc[t][p][0]);
            acc[t][p][kSplit - 1] = Simd::fma(w1, x[t][k + 1], acc[t][p][kSplit - 1]);
          }
        }
      }
      if (k < G) {
        for (int p = 0; p < 2; ++p) {
          const Rows w = Simd::dequant8(codes + k * kStep + p * kHalfRows, s[p], zs[p]);
          for (int t = 0; t < Tokens; ++t) acc[t][p][0] = Simd::fma(w, x[t][k], acc[t][p][0]);
        }
      }
    }
  }

  for (int t = 0; t < Tokens; ++t)
    for (int p = 0; p < 2; ++p) {
      Rows sum = acc[t][p][0];
      if constexpr (kSplit == 2) sum = Simd::fma(acc[t][p][1], 1.0f, sum);
      Simd::store(tile.out + t * kTileRows + p * kHalfRows, sum);
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
