#pragma once
// The decode K loop of the expert GEMM (tiles of 8 to 32 rows, no act-order, activation rows
// 16-byte aligned and inside K): codes and activations both stream through the warp's ring, and
// the loop carries as little bookkeeping per byte as possible, because at decode the SM's issue
// rate, not DRAM, was the limit (bench/NOTES.md run 7: 259 instructions per 1 KB of codes).
#include "backend/cuda_mma/k_loop_common.cuh"

namespace qmoe::cuda_mma {

// One warp: its strip's chunks [c_begin, c_end) against BM / 8 fragments of 8 token rows.
// Preconditions: c_begin is a multiple of the ring's chunks per iteration, and kFlushSpans
// divides both the spans of an iteration and the spans of a group. Groups then end only at
// flush points (every kFlushSpans spans), so the group cursor moves once per flush point, not
// once per span.
template <class T, int BITS, int BM, int kFlushSpans>
__device__ __forceinline__ void staged_k_loop(const PackedWeightView& w, int e, int64_t strip,
                                              int c_begin, int c_end, int lane,
                                              const T* const (&rows)[BM / 8], uint32_t ring_sh,
                                              float (&acc)[BM / 8][4]) {
  using Ring = WarpRing<BITS, BM>;
  constexpr int kFrags = BM / 8;
  constexpr int kSpansPerChunk = spans_per_chunk(BITS);
  constexpr int kChunksPerIter = Ring::kChunksPerIter, kSpansPerIter = Ring::kSpansPerIter;
  constexpr int kCodeLead = Ring::kCodeStages - 1, kActLead = Ring::kActStages - 1;
  static_assert(kSpansPerIter % kFlushSpans == 0);
  const int g = lane / 4, t = lane % 4;

  // Group cursor: offset of the next group's scale pair (zero pair), which `ahead` holds.
  const int spans_per_group = int(w.spans_per_group);
  const int span0 = c_begin * kSpansPerChunk;
  const int grp0 = span0 / spans_per_group;
  const int group_stride = int(w.strips * 8);
  const int64_t base = int64_t(e) * w.groups * group_stride + strip * 8 + g;
  const uint32_t* scale_base = w.scale_pairs + base;
  const uint16_t* zero_base = w.zero_pairs ? w.zero_pairs + base : nullptr;
  int groups_after = int(w.groups) - 1 - grp0;
  int next_at = grp0 * group_stride + (groups_after > 0 ? group_stride : 0);
  int left = (spans_per_group - span0 % spans_per_group) / kFlushSpans;  // flush points
  GroupParams cur = decode_group<T, BITS>(
      load_group(scale_base, zero_base, grp0 * group_stride, BITS), w.scales_bf16);
  RawGroup ahead = load_group(scale_base, zero_base, next_at, BITS);

  // Ring cursors: shared addresses of this lane's slots in the stage read this iteration (out)
  // and in the stage read in the previous one, which this iteration refills (in).
  const uint32_t code_first = ring_sh + lane * 16;
  const uint32_t code_last = code_first + kCodeLead * Ring::kCodeStageBytes;
  const uint32_t act_first = code_first + Ring::kCodeStages * Ring::kCodeStageBytes;
  const uint32_t act_last = act_first + kActLead * Ring::kActStageBytes;
  const uint4* code_src = static_cast<const uint4*>(w.codes) +
                          ((int64_t(e) * w.strips + strip) * w.chunks + c_begin) * kLanes + lane;
  int code_chunk = c_begin, act_chunk = c_begin;  // first chunk of the next copy of each
  int64_t act_k = int64_t(span0) * kSpanK + 8 * t;

  auto issue_codes = [&](uint32_t in) {
#pragma unroll
    for (int u = 0; u < kChunksPerIter; ++u)
      if (code_chunk + u < c_end) copy_async16(in + u * Ring::kSlotBytes, code_src + u * kLanes);
    code_src += kChunksPerIter * kLanes;
    code_chunk += kChunksPerIter;
  };
  // Rows past the tile's last pair are neither copied nor cleared: an mma's token column depends
  // only on that token's activations, and those columns are never stored. Their slots hold what
  // was written there before (zeros from kernel start, or an earlier item's K-split sums, which
  // share the memory): initialised, and harmless whatever the values.
  auto issue_activations = [&](uint32_t in) {
#pragma unroll
    for (int i = 0; i < kSpansPerIter; ++i)
#pragma unroll
      for (int f = 0; f < kFrags; ++f)
        if (rows[f] && act_chunk + i / kSpansPerChunk < c_end)
          copy_async16(in + (i * kFrags + f) * Ring::kSlotBytes, rows[f] + act_k + i * kSpanK);
    act_k += kSpansPerIter * kSpanK;
    act_chunk += kChunksPerIter;
  };
  // Prologue group p holds codes p (and activations p while p < kActLead); loop group it holds
  // codes it + kCodeLead and activations it + kActLead. Waiting until kActLead groups remain
  // therefore completes iteration it's activations and (kCodeLead >= kActLead) its codes.
#pragma unroll
  for (int it = 0; it < kCodeLead; ++it) {
    issue_codes(code_first + it * Ring::kCodeStageBytes);
    if (it < kActLead) issue_activations(act_first + it * Ring::kActStageBytes);
    copy_async_commit();
  }
  uint32_t code_in = code_last, code_out = code_first, act_in = act_last, act_out = act_first;

  float part[kFrags][4];
#pragma unroll
  for (int f = 0; f < kFrags; ++f) part[f][0] = part[f][1] = part[f][2] = part[f][3] = 0.f;
  // One iteration; kTail: the last one, which may hold fewer than kSpansPerIter spans.
  auto iteration = [&]<bool kTail>(int c0) {
    issue_codes(code_in);
    issue_activations(act_in);
    copy_async_commit();
    copy_async_wait<kActLead>();
    uint4 now[kChunksPerIter];
#pragma unroll
    for (int u = 0; u < kChunksPerIter; ++u)
      now[u] = load_shared16(code_out + u * Ring::kSlotBytes);
    uint32_t b[kSpansPerIter][kFrags][4];
#pragma unroll
    for (int i = 0; i < kSpansPerIter; ++i)
#pragma unroll
      for (int f = 0; f < kFrags; ++f) {
        const uint4 v = load_shared16(act_out + (i * kFrags + f) * Ring::kSlotBytes);
        b[i][f][0] = v.x, b[i][f][1] = v.y, b[i][f][2] = v.z, b[i][f][3] = v.w;
      }
    code_in = code_out, act_in = act_out;
    code_out = code_out == code_last ? code_first : code_out + Ring::kCodeStageBytes;
    act_out = act_out == act_last ? act_first : act_out + Ring::kActStageBytes;

    const int spans_here = (c_end - c0) * kSpansPerChunk;
#pragma unroll
    for (int i = 0; i < kSpansPerIter; ++i) {
      if (kTail && i >= spans_here) break;
      span_mma<T, BITS, kFrags>(now[i / kSpansPerChunk], i % kSpansPerChunk, cur.zeros, b[i], part);
      if ((i + 1) % kFlushSpans == 0 && --left == 0) {
        flush_group(cur.scale, part, acc);
        cur = decode_group<T, BITS>(ahead, w.scales_bf16);
        next_at += groups_after-- > 1 ? group_stride : 0;
        ahead = load_group(scale_base, zero_base, next_at, BITS);
        left = spans_per_group / kFlushSpans;
      }
    }
  };
  int c0 = c_begin;
  for (; c0 + kChunksPerIter < c_end; c0 += kChunksPerIter)
    iteration.template operator()<false>(c0);
  iteration.template operator()<true>(c0);
  flush_group(cur.scale, part, acc);  // the group the range ends in, if it ends mid-group
}

// Clears this lane's activation slots once per kernel (see issue_activations).
template <int BITS, int BM>
__device__ __forceinline__ void zero_activation_slots(uint32_t ring_sh, int lane) {
  using Ring = WarpRing<BITS, BM>;
  const uint32_t first = ring_sh + Ring::kCodeStages * Ring::kCodeStageBytes + lane * 16;
#pragma unroll
  for (int i = 0; i < Ring::kActStages * Ring::kActStageBytes / Ring::kSlotBytes; ++i)
    store_shared16(first + i * Ring::kSlotBytes, make_uint4(0, 0, 0, 0));
}

}  // namespace qmoe::cuda_mma
