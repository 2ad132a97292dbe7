#pragma once
// The staged K loop of the expert GEMM (no act-order, activation rows 16-byte aligned and inside
// K): codes and activations both stream through the warp's ring, and the loop carries as little
// bookkeeping per byte as possible, because at decode the SM's issue rate, not DRAM, was the
// limit (bench/NOTES.md run 7: 259 instructions per 1 KB of codes).
#include "backend/cuda_mma/expert_gemm.hpp"
#include "backend/cuda_mma/k_loop_common.cuh"

namespace qmoe::cuda_mma {

// The warps of a work item that work on the same K slice (one per strip) read the same
// activations: each copies its share of the slots into the CTA's one activation ring, and
// one named barrier per iteration publishes the copies and frees the stage the next copies
// refill. Copied once per warp instead, the activations of 16- and 32-row tiles were 4-8x the
// code bytes and L2 bandwidth, not the SM, set the time (bench/NOTES.md, session 3 run 3).
// Only tiles of kMinSharedTileRows rows and more share (plan_gemm, expert_gemm.hpp), so the
// smaller tiles' loop carries none of it: at 16 rows the barrier-ready loop alone cost 3-4%
// where nothing was shared (session 4 run 1).
template <int BM>
inline constexpr bool kMayShare = BM >= kMinSharedTileRows;

// A shared slice is the whole CTA (plan_gemm), so it meets at one named barrier (0 is
// __syncthreads).
inline constexpr int kSliceBarrier = 1;

// One warp: its strip's chunks [c_begin, c_end) against BM / 8 fragments of 8 token rows.
// Preconditions: c_begin is a multiple of the ring's chunks per iteration, and kFlushSpans
// divides both the spans of an iteration and the spans of a group. Groups then end only at
// flush points (every kFlushSpans spans), so the group cursor moves once per flush point, not
// once per span. code_ring and act_ring: this warp's code ring and the activation ring it reads
// (CtaRings). kShared: the slice is all kWarps warps of the CTA (plan_gemm shares only when
// warps_k is 1), act_ring is the CTA's, and every warp (rank = its index) must call this with
// the same range (barriers). kLiveFrags: the fragments multiplied (staged_dispatch); the
// others hold no token row, and their sums stay as they are.
//
// kRun 2 (unshared, one K slice; runs_strips: whole iterations per strip, so c_begin is 0 and
// the strip's end is an iteration's end and a group's): the range is one or two consecutive
// strips of the expert, chunks 0 to c_end = 1 or 2 x w.chunks of the first, run as one stream: the
// strips' codes and scale pairs lie back to back (layout.hpp), so only the activations' k wraps at
// the strip's end. Strip r's sums end in acc_run[r] (zeros for a strip the range does not reach).
// Without runs each strip was a work item, and at short K (6-16 iterations per item at decode) the
// ring's start and drain per item cost as much as the streaming.
//
// kRun 2 with kShared: the warp multiplies strips `strip` and `strip` + 1 together (the latter
// only where it exists; otherwise the first again, whose sums are never stored), so each
// activation fragment read from the ring feeds both strips' weights. The two strips' sums need
// the registers that per-group partial sums took, so here the scales are folded into the
// weights (rounded to T, as every fused WNA16 kernel does) instead of applied per group in fp32.
template <class T, WeightElement kElem, int BM, int kFlushSpans, bool kShared, int kRun,
          int kLiveFrags = BM / 8>
__device__ __forceinline__ void staged_k_loop(const PackedWeightView& w, int e, int64_t strip,
                                              int c_begin, int c_end, int lane,
                                              const T* const (&rows)[BM / 8], uint32_t code_ring,
                                              uint32_t act_ring, int rank,
                                              float (&acc_run)[kRun][BM / 8][4]) {
  static_assert(kRun == 1 || kRun == 2);
  static_assert(kLiveFrags == BM / 8 || (kRun > 1 && kShared),
                "fewer fragments only side by side: the one-strip span_mma reads all of b");
  constexpr bool kTogether = kRun > 1 && kShared;   // the strips side by side, scales folded
  constexpr bool kRunWraps = kRun > 1 && !kShared;  // copies may cross into the run's next strip
  constexpr int kCodeStrips = kTogether ? 2 : 1;
  using Ring = WarpRing<kElem, BM, kCodeStrips>;
  constexpr int kFrags = BM / 8;
  constexpr int kSpansPerChunk = spans_per_chunk(kElem);
  constexpr int kChunksPerIter = Ring::kChunksPerIter, kSpansPerIter = Ring::kSpansPerIter;
  constexpr int kStages = Ring::kCodeStages, kLead = kStages - 1;
  static_assert(Ring::kActStages == kStages, "codes and activations share the stage cursor");
  static_assert(kSpansPerIter % kFlushSpans == 0);
  const int g = lane / 4, t = lane % 4;

  // Group cursor: the next group's scale pair (zero pair) is loaded a group ahead, into `ahead`,
  // from pointers stepped one group per group (the arrays end with two padding groups, so the
  // loads past the warp's last group need no check). Symmetric weights keep their zero offsets.
  const int spans_per_group = int(w.spans_per_group);
  const int span0 = c_begin * kSpansPerChunk;
  constexpr int group_stride = kGroupPairStride;
  const int64_t first = group_pair_index(e, strip, span0 / spans_per_group, g, w.strips, w.groups);
  const uint32_t* scale_at = w.scale_pairs + first;
  const uint16_t* zero_at = w.zero_pairs ? w.zero_pairs + first : nullptr;
  int left = (spans_per_group - span0 % spans_per_group) / kFlushSpans;  // flush points
  // Together: strip j's codes and scale (zero) pairs at j x these strides from strip's.
  const int next_strip = kTogether && strip + 1 < w.strips ? 1 : 0;
  const int64_t pair_stride = next_strip * w.groups * kGroupPairStride;
  const int64_t code_stride = next_strip * w.chunks * kLanes;
  GroupParams cur[kCodeStrips];
  RawGroup ahead[kCodeStrips];
  uint2 folded[kCodeStrips];  // together: cur's scales as T, splat (span_mma)
#pragma unroll
  for (int j = 0; j < kCodeStrips; ++j) {
    cur[j] = decode_group<T>(load_group<kElem>(scale_at, zero_at, j * pair_stride), w.scales_bf16);
    ahead[j] = load_group<kElem>(scale_at, zero_at, j * pair_stride + group_stride);
    if constexpr (kTogether) folded[j] = {splat<T>(cur[j].scale.x), splat<T>(cur[j].scale.y)};
  }
  scale_at += group_stride;
  if (zero_at) zero_at += group_stride;

  // Stage s: this warp's codes at code_base + s * kCodeStageBytes, the slice's activations at
  // act_base + s * kActStageBytes. Iteration i reads stage i % kStages and refills the stage
  // read by iteration i - 1 with iteration i + kLead's copies.
  const uint32_t code_base = code_ring + lane * 16;
  const uint32_t act_base = act_ring + lane * 16;
  const uint4* code_src = static_cast<const uint4*>(w.codes) +
                          ((int64_t(e) * w.strips + strip) * w.chunks + c_begin) * kLanes + lane;
  int64_t act_k = int64_t(span0) * kSpanK + 8 * t;
  // Shared: activation slot q = i * kFrags + f (span i, fragment f) is this warp's to copy when
  // q % kWarps == rank (at 48 rows, 12 slots: warps 0-3 copy two, 4-7 one). Its slots' sources
  // are fixed for the whole range, so they are picked once here: tested per slot, the choice was
  // recomputed in every iteration (~20 instructions each at 32 rows, where the registers are
  // capped at 128).
  constexpr int kSlots = kSpansPerIter * kFrags;
  constexpr int kMySlots = kShared ? (kSlots + kWarps - 1) / kWarps : 1;
  const T* my_src[kMySlots];  // row + the span's k offset; nullptr: no row or no slot
  int my_chunk[kMySlots];     // chunk of the iteration the slot's span lies in
  uint32_t my_dst[kMySlots];  // byte offset of the slot in a stage
  if constexpr (kShared) {
#pragma unroll
    for (int j = 0; j < kMySlots; ++j) {
      const int q = rank + j * kWarps, i = q / kFrags, f = q % kFrags;
      const T* row = nullptr;  // stays nullptr for q past the last slot
#pragma unroll
      for (int ff = 0; ff < kFrags; ++ff)
        if (ff == f && q < kSlots) row = rows[ff];
      my_src[j] = row ? row + i * kSpanK : nullptr;
      my_chunk[j] = i / kSpansPerChunk;
      my_dst[j] = q * Ring::kSlotBytes;
    }
  }

  // The copies of the iteration starting at chunk c into stage s; kChecked: some of its chunks
  // may lie at or past c_end, so each copy checks (unchecked only while c + kChunksPerIter <=
  // c_end is known); kWrap: c may be a run's second strip's first chunk, where k restarts.
  auto issue = [&]<bool kChecked, bool kWrap>(int c, int s) {
    if constexpr (kWrap) {
      if (act_k >= w.K) act_k -= w.K;  // 8 t < kSpanK, so no earlier k reaches K
    }
    const uint32_t code_in = code_base + s * Ring::kCodeStageBytes;
    const uint32_t act_in = act_base + s * Ring::kActStageBytes;
#pragma unroll
    for (int j = 0; j < kCodeStrips; ++j)
#pragma unroll
      for (int u = 0; u < kChunksPerIter; ++u) {
        if (!kChecked || c + u < c_end)
          copy_async16(code_in + (j * kChunksPerIter + u) * Ring::kSlotBytes,
                       code_src + j * code_stride + u * kLanes);
      }
    // Rows past the tile's last pair are neither copied nor cleared: an mma's token column
    // depends only on that token's activations, and those columns are never stored. Their slots
    // hold what was written there before (zeros from kernel start, an earlier item's
    // activations, or, unshared, its K-split sums, which share the memory): initialised, and
    // harmless whatever the values.
    if constexpr (kShared) {
#pragma unroll
      for (int j = 0; j < kMySlots; ++j)
        if (my_src[j] && (!kChecked || c + my_chunk[j] < c_end))
          copy_async16(act_in + my_dst[j], my_src[j] + act_k);
    } else {
#pragma unroll
      for (int i = 0; i < kSpansPerIter; ++i)
#pragma unroll
        for (int f = 0; f < kFrags; ++f)
          if (rows[f] && (!kChecked || c + i / kSpansPerChunk < c_end))
            copy_async16(act_in + (i * kFrags + f) * Ring::kSlotBytes,
                         rows[f] + act_k + i * kSpanK);
    }
    code_src += kChunksPerIter * kLanes;
    act_k += kSpansPerIter * kSpanK;
    copy_async_commit();
  };
  // Prologue: iterations 0 .. kLead - 1 into stages 0 .. kLead - 1. Iteration i then waits
  // until kLead - 1 of its groups remain pending (its own copies for stage i have landed), meets
  // the slice at the barrier (everyone's copies for stage i have landed, and everyone is done
  // reading stage i - 1), and only then refills stage i - 1.
#pragma unroll
  for (int s = 0; s < kLead; ++s)
    issue.template operator()<true, kRunWraps>(c_begin + s * kChunksPerIter, s);

  float part[kFrags][4];
#pragma unroll
  for (int f = 0; f < kFrags; ++f) part[f][0] = part[f][1] = part[f][2] = part[f][3] = 0.f;
  // The iteration starting at chunk c0, reading stage s, into strip kR's sums acc_run[kR];
  // kTail: the last one, which may hold fewer than kSpansPerIter spans; kChecked and kWrap as
  // for issue (of the copies it issues).
  auto iteration = [&]<bool kTail, bool kChecked, bool kWrap, int kR>(int c0, int s) {
    copy_async_wait<kLead - 1>();
    if constexpr (kShared) sync_named(kSliceBarrier, kWarps * kLanes);
    issue.template operator()<kChecked, kWrap>(c0 + kLead * kChunksPerIter, s == 0 ? kLead : s - 1);
    const uint32_t code_out = code_base + s * Ring::kCodeStageBytes;
    const uint32_t act_out = act_base + s * Ring::kActStageBytes;
    uint4 now[kChunksPerIter][kCodeStrips];
#pragma unroll
    for (int u = 0; u < kChunksPerIter; ++u)
#pragma unroll
      for (int j = 0; j < kCodeStrips; ++j)
        now[u][j] = load_shared16(code_out + (j * kChunksPerIter + u) * Ring::kSlotBytes);
    uint32_t b[kSpansPerIter][kFrags][4];
#pragma unroll
    for (int i = 0; i < kSpansPerIter; ++i)
#pragma unroll
      for (int f = 0; f < kLiveFrags; ++f) {
        const uint4 v = load_shared16(act_out + (i * kFrags + f) * Ring::kSlotBytes);
        b[i][f][0] = v.x, b[i][f][1] = v.y, b[i][f][2] = v.z, b[i][f][3] = v.w;
      }

    const int spans_here = (c_end - c0) * kSpansPerChunk;
#pragma unroll
    for (int i = 0; i < kSpansPerIter; ++i) {
      if (kTail && i >= spans_here) break;
      ZeroOffsets zeros[kCodeStrips];
#pragma unroll
      for (int j = 0; j < kCodeStrips; ++j) zeros[j] = cur[j].zeros;
      if constexpr (kTogether)
        span_mma<T, kElem, kFrags, 2, true, kLiveFrags>(now[i / kSpansPerChunk], i % kSpansPerChunk,
                                                        zeros, folded, b[i], acc_run);
      else
        span_mma<T, kElem, kFrags>(now[i / kSpansPerChunk][0], i % kSpansPerChunk, zeros[0], b[i],
                                   part);
      if ((i + 1) % kFlushSpans == 0 && --left == 0) {
        if constexpr (!kTogether) flush_group(cur[0].scale, part, acc_run[kR]);
#pragma unroll
        for (int j = 0; j < kCodeStrips; ++j) {
          cur[j].scale = unpack_scales(ahead[j].scales, w.scales_bf16);
          if constexpr (kTogether) folded[j] = {splat<T>(cur[j].scale.x), splat<T>(cur[j].scale.y)};
        }
        scale_at += group_stride;
#pragma unroll
        for (int j = 0; j < kCodeStrips; ++j)
          ahead[j].scales = load_line_hinted(scale_at + j * pair_stride);
        if (zero_at) {
#pragma unroll
          for (int j = 0; j < kCodeStrips; ++j)
            cur[j].zeros = zero_offsets<T>(ahead[j].zeros & 0xff, ahead[j].zeros >> 8);
          zero_at += group_stride;
#pragma unroll
          for (int j = 0; j < kCodeStrips; ++j)
            ahead[j].zeros = load_line_hinted(zero_at + j * pair_stride);
        }
        left = spans_per_group / kFlushSpans;
      }
    }
  };
  // Whole trips of kStages iterations into strip kR's sums, with every stage offset a constant
  // (the stage cursor s is 0 between trips), while the copies they issue stay below end; and
  // single iterations at a run-time stage, their copies checked.
  int c0 = c_begin, s = 0;
  auto trips = [&]<int kR>(int end) {
    for (; c0 + (kStages + kLead) * kChunksPerIter <= end; c0 += kStages * kChunksPerIter)
#pragma unroll
      for (int k = 0; k < kStages; ++k)
        iteration.template operator()<false, false, false, kR>(c0 + k * kChunksPerIter, k);
  };
  auto single = [&]<int kR>() {
    iteration.template operator()<false, true, kRunWraps, kR>(c0, s);
    c0 += kChunksPerIter;
    s = s == kLead ? 0 : s + 1;
  };
  if constexpr (kRun == 1 || kTogether) {
    trips.template operator()<0>(c_end);
    while (c0 + kChunksPerIter < c_end) single.template operator()<0>();
    iteration.template operator()<true, true, false, 0>(c0, s);
    // The group the range ends in, if mid-group.
    if constexpr (!kTogether) flush_group(cur[0].scale, part, acc_run[0]);
  } else {
    // Strip 0 ends with an iteration (runs need w.chunks whole iterations) and with a group,
    // so part is flushed there. The singles around the strip's end issue the copies that
    // cross into strip 1 (kWrap), and strip 1's trips start once the stage cursor is 0 again.
    const int strip_end = int(w.chunks);
    trips.template operator()<0>(strip_end);
    while (c0 < strip_end) single.template operator()<0>();
    while (s != 0 && c0 < c_end) single.template operator()<1>();
    trips.template operator()<1>(c_end);
    while (c0 < c_end) single.template operator()<1>();
    flush_group(cur[0].scale, part, acc_run[1]);  // nothing left where groups divide K (they do)
  }
}

// Clears this lane's slots of the activation ring act_ring once per kernel (see the absent rows
// in issue; a shared ring is cleared by every warp, before the barrier that follows).
template <WeightElement kElem, int BM>
__device__ __forceinline__ void zero_activation_slots(uint32_t act_ring, int lane) {
  using Ring = WarpRing<kElem, BM>;
#pragma unroll
  for (int i = 0; i < Ring::kActBytes / Ring::kSlotBytes; ++i)
    store_shared16(act_ring + lane * 16 + i * Ring::kSlotBytes, make_uint4(0, 0, 0, 0));
}

}  // namespace qmoe::cuda_mma
