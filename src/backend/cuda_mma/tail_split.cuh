#pragma once
// The last round of the expert GEMM's work items, split along K across CTAs (GemmPlan::tail_parts).
//
// Persistent CTAs take items round-robin, so with `items` not a multiple of the grid the last
// round keeps only items % grid CTAs busy while the rest idle: Mixtral-8x7B's GEMM1 at 128 tokens
// runs 896 items on 264 CTAs, 3.4 rounds for the time of 4 (bench/NOTES.md, session 9). Here each
// item of that last round becomes `parts` units, each over its own share of every warp's K range,
// run by different CTAs. All but the last part store their sums (fp32, as the warps hold them in
// registers) and raise a flag; the last part's CTA waits for those flags, adds the partial sums
// to its own in part order (so the result is the same from run to run) and finishes the item as
// usual. Forward progress: a CTA waits only for CTAs of lower index, which never wait themselves,
// and relies on the hardware starting CTAs in index order (as stream-K GEMMs and decoupled
// look-back scans do; CUDA does not document it).
#include <cstdint>

#include "backend/cuda_mma/expert_gemm.hpp"
#include "backend/cuda_mma/k_loop_common.cuh"

namespace qmoe::cuda_mma {

__device__ __forceinline__ void store_release(int32_t* p, int32_t v) {
  asm volatile("st.release.gpu.global.s32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
__device__ __forceinline__ int32_t load_acquire(const int32_t* p) {
  int32_t v;
  asm volatile("ld.acquire.gpu.global.s32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

// The work units of one launch: items [0, round_items) whole, then each later item as `parts`
// units (parts 1: no split).
struct TailSplit {
  int round_items, parts, units;
};

// One unit: its item, its part (0 for whole items) and, in the tail, its item's index there.
struct WorkUnit {
  int item, part, tail_item;
};

// max_parts from the plan; `slots` partial sums fit the problem's buffers; at most
// `iterations` parts (a warp's iterations per item; rounding each part up to whole iterations may
// still leave the last part empty, which is harmless).
__device__ __forceinline__ TailSplit tail_split(int items, int max_parts, int64_t slots,
                                                int iterations) {
  const int grid = int(gridDim.x);
  const int round_items = items - items % grid, tail = items - round_items;
  int parts = 1;
  if (tail > 0) {
    parts = min(min(max_parts, grid / tail), iterations);
    while (parts > 1 && int64_t(tail) * (parts - 1) > slots) --parts;
    parts = max(parts, 1);
  }
  return {round_items, parts, round_items + tail * parts};
}

__device__ __forceinline__ WorkUnit work_unit(const TailSplit& split, int unit) {
  if (unit < split.round_items) return {unit, 0, -1};
  const int t = (unit - split.round_items) / split.parts;
  return {split.round_items + t, (unit - split.round_items) % split.parts, t};
}

// Part `part` of `parts` of the chunk range [c_begin, c_end), in whole iterations.
__device__ __forceinline__ int2 part_range(int c_begin, int c_end, int part, int parts,
                                           int chunks_per_iter) {
  const int iterations = (c_end - c_begin + chunks_per_iter - 1) / chunks_per_iter;
  const int per = (iterations + parts - 1) / parts * chunks_per_iter;
  const int begin = min(c_end, c_begin + part * per);
  return make_int2(begin, min(c_end, begin + per));
}

// Where warp `warp`'s partial sums of producer slot `slot` lie: [kStrips][kFrags][32 lanes] float4
// per warp, as the registers hold them, so every store and load is one coalesced 16-byte access.
template <int kStrips, int kFrags>
__device__ __forceinline__ float4* partial_slot(float* partials, int64_t slot, int warp) {
  return reinterpret_cast<float4*>(partials) + (slot * kWarps + warp) * (kStrips * kFrags * kLanes);
}

template <int kStrips, int kFrags>
inline constexpr int64_t kPartialSlotBytes = int64_t(kWarps) * kStrips* kFrags* kLanes * 16;

// A part other than the last: this warp's sums to the slot, then (the whole CTA's stores done and
// made visible to the GPU) the slot's flag.
template <int kStrips, int kFrags>
__device__ __forceinline__ void publish_partial(const float (&acc)[kStrips][kFrags][4],
                                                float4* mine, int lane, int32_t* flag) {
#pragma unroll
  for (int j = 0; j < kStrips; ++j)
#pragma unroll
    for (int f = 0; f < kFrags; ++f)
      __stcg(mine + (j * kFrags + f) * kLanes + lane,
             make_float4(acc[j][f][0], acc[j][f][1], acc[j][f][2], acc[j][f][3]));
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence();
    store_release(flag, 1);
  }
}

// The last part: waits for the `producers` flags from `flags` on, clears them for the next launch,
// and adds their slots' sums (this warp's, `first` then every slot_stride float4) in part order.
template <int kStrips, int kFrags>
__device__ __forceinline__ void collect_partials(float (&acc)[kStrips][kFrags][4],
                                                 const float4* first, int64_t slot_stride,
                                                 int producers, int lane, int32_t* flags) {
  if (threadIdx.x == 0) {
    for (int q = 0; q < producers; ++q) {
      while (load_acquire(flags + q) == 0) {
      }
      flags[q] = 0;  // nothing reads it again before this launch ends
    }
  }
  __syncthreads();
  for (int q = 0; q < producers; ++q) {
#pragma unroll
    for (int j = 0; j < kStrips; ++j)
#pragma unroll
      for (int f = 0; f < kFrags; ++f) {
        const float4 v = __ldcg(first + q * slot_stride + (j * kFrags + f) * kLanes + lane);
        acc[j][f][0] += v.x, acc[j][f][1] += v.y, acc[j][f][2] += v.z, acc[j][f][3] += v.w;
      }
  }
}

}  // namespace qmoe::cuda_mma
