#pragma once
// Pieces shared by the two K loops of the expert GEMM (k_loop_staged.cuh, k_loop_general.cuh):
// the warp's shared-memory ring, group scale/zero handling and the mma of one span.
#include <cstdint>

#include "backend/cuda_mma/expert_gemm.hpp"
#include "backend/cuda_mma/layout.hpp"
#include "backend/cuda_mma/mma_primitives.cuh"

namespace qmoe::cuda_mma {

inline constexpr int kWarps = 8;  // per CTA

// Chunks a warp multiplies per iteration: at most 1 KB of codes; at tiles of 16 rows and more the
// registers go to accumulators and to the iteration's activations.
template <WeightElement kElem, int BM>
__host__ __device__ constexpr int chunks_per_iteration() {
  return BM == 8 || code_bits(kElem) == 8 ? 2 : 1;
}

// The staging areas in shared memory, filled by cp.async. Each lane copies and later reads
// only its own 16-byte code slots, so for codes cp.async's per-thread completion is the only
// ordering needed; activations shared by the CTA's warps also need the slice's barrier
// (k_loop_staged.cuh). Codes run kCodeStages - 1 iterations ahead, and so do the activations
// (the staged loop): loaded straight into registers they were consumed ~20 instructions after
// their load and their L2 latency stalled the first mma of every iteration (42% of all stall
// samples, bench/NOTES.md run 6).
// A warp's code ring is [kCodeStages][kStrips][kChunksPerIter] slots (kStrips: the strips the
// warp multiplies together, staged_k_loop), an activation ring [kActStages][kSpansPerIter][BM / 8]
// slots; every slot is 16 bytes of 32 lanes. CtaRings places them.
template <WeightElement kElem, int BM, int kStrips = 1>
struct WarpRing {
  static constexpr int kChunksPerIter = chunks_per_iteration<kElem, BM>();
  static constexpr int kSpansPerIter = kChunksPerIter * spans_per_chunk(kElem);
  // cp.async groups complete in order, so the wait for the activations also bounds the codes'
  // lead: more code stages than activation stages would buy nothing (bench/NOTES.md, session 3
  // run 2).
  static constexpr int kCodeStages = 3;
  static constexpr int kActStages = 3;
  static constexpr int kSlotBytes = kLanes * 16;
  static constexpr int kCodeStageBytes = kStrips * kChunksPerIter * kSlotBytes;
  static constexpr int kActStageBytes = kSpansPerIter * (BM / 8) * kSlotBytes;
  static constexpr int kCodeBytes = kCodeStages * kCodeStageBytes;
  static constexpr int kActBytes = kActStages * kActStageBytes;
};

// Where a CTA's rings lie (offsets from the start of its dynamic shared memory). Unshared, warp
// by warp, its code ring then its activation ring (so one register addresses both): 72 KB at
// 8-row tiles (three CTAs per SM), 108 KB at 32 rows of int4, 156 KB at 48, 204-216 KB at 64.
// Shared, the kWarps code rings and then the CTA's one activation ring: 24 KB at 32 rows of
// int4, 30 KB at 48 (two CTAs per SM where the registers allow), 36 KB at 64; with two strips
// per warp (kStrips 2) 36, 42 and 48 KB.
template <WeightElement kElem, int BM, int kStrips = 1>
struct CtaRings {
  using Ring = WarpRing<kElem, BM, kStrips>;
  __host__ __device__ static constexpr uint32_t code_ring(int warp, bool shared) {
    return uint32_t(warp) * (shared ? Ring::kCodeBytes : Ring::kCodeBytes + Ring::kActBytes);
  }
  __host__ __device__ static constexpr uint32_t act_ring(int warp, bool shared) {
    return shared ? uint32_t(kWarps * Ring::kCodeBytes) : code_ring(warp, false) + Ring::kCodeBytes;
  }
  __host__ __device__ static constexpr size_t bytes(bool shared) {
    return size_t(kWarps) * Ring::kCodeBytes + size_t(shared ? 1 : kWarps) * Ring::kActBytes;
  }
};

// A group's scale pair and zero pair as loaded, and as the dequantization uses them. Loads go
// into Raw a group ahead; they are decoded only when their group starts, so no warp waits on a
// scale load in the middle of its mma chain.
struct RawGroup {
  uint32_t scales, zeros;
};

struct GroupParams {
  float2 scale;
  ZeroOffsets zeros;
};

// Without zero_base the weights are symmetric: both rows' zero is 2^(code bits - 1).
template <WeightElement kElem>
__device__ __forceinline__ RawGroup load_group(const uint32_t* scale_base,
                                               const uint16_t* zero_base, int64_t at) {
  constexpr uint32_t mid = 1u << (code_bits(kElem) - 1);
  return {load_line_hinted(scale_base + at),
          zero_base ? load_line_hinted(zero_base + at) : mid | mid << 8};
}

template <class T>
__device__ __forceinline__ GroupParams decode_group(RawGroup raw, bool bf16_scales) {
  return {unpack_scales(raw.scales, bf16_scales),
          zero_offsets<T>(raw.zeros & 0xff, raw.zeros >> 8)};
}

// The two mma steps of span s of one chunk per strip (a lane's 16 bytes of codes each) into
// acc[strip], per fragment of 8 tokens: each activation fragment feeds every strip's weights.
// kScaled: the weights are multiplied by their group scales (scales[strip], splat: row g's
// scale in both halves, then row g + 8's) and rounded to T before the mma; otherwise they enter
// it as exact integers and the scale comes later (flush_group).
// Only the first kLive fragments are multiplied (the others hold no token row).
template <class T, WeightElement kElem, int kFrags, int kStrips, bool kScaled, int kLive = kFrags>
__device__ __forceinline__ void span_mma(const uint4 (&chunk)[kStrips], int s,
                                         const ZeroOffsets (&zeros)[kStrips],
                                         const uint2 (&scales)[kStrips],
                                         const uint32_t (&b)[kFrags][4],
                                         float (&acc)[kStrips][kFrags][4]) {
  constexpr int kWordsPerStep = code_bits(kElem) / 4;  // 8 codes per lane (layout.hpp)
#pragma unroll
  for (int jj = 0; jj < 2; ++jj) {
    uint32_t a[kStrips][4];
#pragma unroll
    for (int j = 0; j < kStrips; ++j) {
      const uint32_t* words = reinterpret_cast<const uint32_t*>(&chunk[j]);
      Dequant<T, kElem>::step(words + (s * 2 + jj) * kWordsPerStep, zeros[j], a[j]);
      if constexpr (kScaled) {
#pragma unroll
        for (int r = 0; r < 4; ++r)
          a[j][r] = MmaType<T>::mul2(a[j][r], r % 2 ? scales[j].y : scales[j].x);
      }
    }
#pragma unroll
    for (int f = 0; f < kLive; ++f)
#pragma unroll
      for (int j = 0; j < kStrips; ++j)
        MmaType<T>::mma(acc[j][f], a[j], b[f][2 * jj], b[f][2 * jj + 1]);
  }
}

// One strip, scales applied later (flush_group).
template <class T, WeightElement kElem, int kFrags>
__device__ __forceinline__ void span_mma(const uint4& chunk, int s, const ZeroOffsets& zeros,
                                         const uint32_t (&b)[kFrags][4], float (&part)[kFrags][4]) {
  const uint2 unused[1] = {};
  span_mma<T, kElem, kFrags, 1, false>(reinterpret_cast<const uint4(&)[1]>(chunk), s,
                                       reinterpret_cast<const ZeroOffsets(&)[1]>(zeros), unused, b,
                                       reinterpret_cast<float(&)[1][kFrags][4]>(part));
}

// A finished group: its integer products, scaled in fp32 (rows g and g + 8), join the result.
template <int kFrags>
__device__ __forceinline__ void flush_group(float2 scale, float (&part)[kFrags][4],
                                            float (&acc)[kFrags][4]) {
#pragma unroll
  for (int f = 0; f < kFrags; ++f) {
    acc[f][0] += scale.x * part[f][0], acc[f][1] += scale.x * part[f][1];
    acc[f][2] += scale.y * part[f][2], acc[f][3] += scale.y * part[f][3];
    part[f][0] = part[f][1] = part[f][2] = part[f][3] = 0.f;
  }
}

}  // namespace qmoe::cuda_mma
