#pragma once
// The one f32 tile kernel body shared by every ISA (see panel_format.hpp for the layout). Each
// kernel_<isa>.cpp defines a `Simd` struct in an anonymous namespace and instantiates
// run_panel_tile<Simd>; because Simd has internal linkage, so has every instantiation, and code
// compiled for AVX-512 can never be picked by the linker for a caller on a lesser CPU. For the
// same reason this header calls nothing but Simd's members (no std functions, no inline members
// of qmoe types).
//
// Simd provides, for 16 float lanes `Rows`:
//   kMaxTokens, zero(), splat(f), load(const float*), load_u8(const uint8_t*), add(a, b),
//   mul_add(a, b, c)         a * b + c
//   codes4(p, lo, hi)        16 bytes of 4-bit k-pairs -> low and high nibbles as floats
//   e2m1_codes4(p, lo, hi)   the same for e2m1 nibbles -> their e2m1 values
//   codes8(p)                16 bytes of 8-bit codes -> floats
//   e8m0(p)                  16 e8m0 bytes -> their scales 2^(e - 127) as floats
//   fma(w, x, acc)           acc + w * x (x broadcast)
//   store(float*, Rows)
//   prefetch(const uint8_t*) a hint to bring one cache line towards L1
#include "backend/cpu/panel_format.hpp"

namespace qmoe::cpu {

// What a code byte of a panel holds (PanelFormat's bits and e2m1).
enum class Codes { uint4, uint8, e2m1 };
// The f32 bits of an e8m0 scale byte e >= 1 are e << 23; 2^-127 (e = 0) is the subnormal
// 0x00400000, below every e << 23, so one integer max covers it.
inline constexpr int kE8m0Shift = 23;
inline constexpr int kE8m0ZeroBits = 0x00400000;
template <Codes C>
inline constexpr int kCodeBits = C == Codes::uint8 ? 8 : 4;
// The zero of symmetric codes: 2^(bits - 1) for unsigned integers, 0 for e2m1 (signed floats).
template <Codes C>
inline constexpr float kImplicitZero = C == Codes::e2m1 ? 0.0f : float(1 << (kCodeBits<C> - 1));

// Software prefetch distance along a panel stream: one line per 64 bytes of codes, this far
// ahead. Panels are short (13-70 KB) and each thread reads one stream, so the hardware
// prefetcher alone leaves a core well below its DRAM read rate, and this VM's memory latency is
// high. Measured with bench_cpu_moe --cpu-only (2 threads, one stream per panel; single samples
// on a noisy VM), fraction of the same-run read ceiling: Qwen3 M=16 0.58 at 2 KB, 0.58 at 4 KB,
// 0.66 at 8 KB, 0.67 at 16 KB, 0.66 at 32 KB; Mixtral-half M=1 0.47, 0.70, 0.72, 0.74, 0.77.
inline constexpr int64_t kPrefetchBytes = 16384;

// Independent accumulator chains per token: with one or two tokens the FMAs of a tile would
// otherwise wait on each other's latency (4 cycles, two FMA pipes), so k steps rotate over
// several partial sums that are added once per group.
template <int Tokens>
inline constexpr int kChains = Tokens == 1   ? 4
                               : Tokens == 2 ? 2
                                             : 1;

// One half panel (16 rows, `half` 0 or 1) of one group: the sums of q * x over the group's k
// into out[t][chain]. A group's codes are read twice, once per half, the second time from L1:
// that keeps the partial sums of up to kMaxTokens tokens in registers. They live in a local
// array until the end: codes are bytes, which may alias anything, so sums kept in the caller's
// array would be stored back after every step.
template <class Simd, Codes C, int Tokens>
[[gnu::always_inline]] inline void half_group_sums(
    const uint8_t* codes, int half, int64_t G, const float* const* x,
    typename Simd::Rows (&out)[Tokens][kChains<Tokens>]) {
  constexpr int kC = kChains<Tokens>;
  constexpr int64_t kStep = kTileRows;  // bytes of codes per k-pair (int4) or k (int8)
  typename Simd::Rows part[Tokens][kC];
  for (int t = 0; t < Tokens; ++t)
    for (int c = 0; c < kC; ++c) part[t][c] = Simd::zero();
  const uint8_t* at = codes + half * kHalfRows;
  if constexpr (C != Codes::uint8) {
    // k-pair j feeds chains (2j) % C and (2j + 1) % C: its low nibbles are k = 2j.
    auto pair = [&](int64_t j, int chain) {
      if (half == 0 && j % 2 == 0) Simd::prefetch(codes + j * kStep + kPrefetchBytes);
      typename Simd::Rows lo, hi;
      if constexpr (C == Codes::e2m1) {
        Simd::e2m1_codes4(at + j * kStep, lo, hi);
      } else {
        Simd::codes4(at + j * kStep, lo, hi);
      }
      for (int t = 0; t < Tokens; ++t) {
        part[t][chain % kC] = Simd::fma(lo, x[t][2 * j], part[t][chain % kC]);
        part[t][(chain + 1) % kC] = Simd::fma(hi, x[t][2 * j + 1], part[t][(chain + 1) % kC]);
      }
    };
    int64_t j = 0;
    for (; j + 2 <= G / 2; j += 2) {
      pair(j, 0);
      pair(j + 1, 2);
    }
    if (j < G / 2) pair(j, 0);
  } else {
    auto step = [&](int64_t k, int chain) {
      if (half == 0 && k % 2 == 0) Simd::prefetch(codes + k * kStep + kPrefetchBytes);
      const typename Simd::Rows w = Simd::codes8(at + k * kStep);
      for (int t = 0; t < Tokens; ++t)
        part[t][chain % kC] = Simd::fma(w, x[t][k], part[t][chain % kC]);
    };
    int64_t k = 0;
    for (; k + 4 <= G; k += 4) {
      step(k, 0);
      step(k + 1, 1);
      step(k + 2, 2);
      step(k + 3, 3);
    }
    for (; k < G; ++k) step(k, 0);
  }
  for (int t = 0; t < Tokens; ++t)
    for (int c = 0; c < kC; ++c) out[t][c] = part[t][c];
}

template <class Simd, Codes C, bool ZeroPoints, int Tokens>
void panel_tile(const PanelFormat& f, const PanelTile& tile) {
  using Rows = typename Simd::Rows;
  constexpr int kC = kChains<Tokens>;
  constexpr int64_t kHeader = panel_header_bytes(C == Codes::e2m1, ZeroPoints);
  const int64_t G = f.group_k;
  const int64_t group_bytes = kHeader + G * kTileRows * kCodeBits<C> / 8;
  const Rows implicit_zero = Simd::splat(kImplicitZero<C>);

  for (int t = 0; t < Tokens; ++t)
    for (int half = 0; half < 2; ++half)
      Simd::store(tile.out + t * kTileRows + half * kHalfRows, Simd::zero());

  for (int64_t g = 0; g < f.groups; ++g) {
    const uint8_t* head = tile.panel + g * group_bytes;
    const float* x[Tokens];
    for (int t = 0; t < Tokens; ++t) x[t] = tile.x[t] + g * G;
    for (int half = 0; half < 2; ++half) {
      Rows part[Tokens][kC];
      half_group_sums<Simd, C, Tokens>(head + kHeader, half, G, x, part);
      Rows s;
      if constexpr (C == Codes::e2m1) {
        s = Simd::e8m0(head + half * kHalfRows);
      } else {
        s = Simd::load(reinterpret_cast<const float*>(head) + half * kHalfRows);
      }
      const Rows z =
          ZeroPoints ? Simd::load_u8(head + kTileRows * 4 + half * kHalfRows) : implicit_zero;
      for (int t = 0; t < Tokens; ++t) {
        Rows sum = part[t][0];
        for (int c = 1; c < kC; ++c) sum = Simd::add(sum, part[t][c]);
        sum = Simd::mul_add(z, Simd::splat(-tile.group_sum[t][g]), sum);
        float* out = tile.out + t * kTileRows + half * kHalfRows;
        Simd::store(out, Simd::mul_add(s, sum, Simd::load(out)));
      }
    }
  }
}

template <class Simd, Codes C, bool ZeroPoints, int Tokens = 1>
void panel_tile_for_tokens(const PanelFormat& f, const PanelTile& tile) {
  if constexpr (Tokens < Simd::kMaxTokens) {
    if (tile.tokens > Tokens)
      return panel_tile_for_tokens<Simd, C, ZeroPoints, Tokens + 1>(f, tile);
  }
  panel_tile<Simd, C, ZeroPoints, Tokens>(f, tile);
}

template <class Simd>
void run_panel_tile(const PanelFormat& f, const PanelTile& tile) {
  if (f.e2m1) return panel_tile_for_tokens<Simd, Codes::e2m1, false>(f, tile);
  if (f.bits == 4) {
    if (f.zero_points) return panel_tile_for_tokens<Simd, Codes::uint4, true>(f, tile);
    return panel_tile_for_tokens<Simd, Codes::uint4, false>(f, tile);
  }
  if (f.zero_points) return panel_tile_for_tokens<Simd, Codes::uint8, true>(f, tile);
  panel_tile_for_tokens<Simd, Codes::uint8, false>(f, tile);
}

}  // namespace qmoe::cpu
