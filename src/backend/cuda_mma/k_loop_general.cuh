#pragma once
// The general K loop of the expert GEMM: act-order (activations gathered through k_source,
// groups looked up per span), K not whole chunks or unaligned activation rows. Codes stream
// through the warp's ring; activations are loaded from global memory.
#include "backend/cuda_mma/expert_gemm.hpp"
#include "backend/cuda_mma/k_loop_common.cuh"

namespace qmoe::cuda_mma {

template <class T>
__device__ __forceinline__ uint32_t pack2(T lo, T hi) {
  return uint32_t(*reinterpret_cast<const uint16_t*>(&lo)) |
         uint32_t(*reinterpret_cast<const uint16_t*>(&hi)) << 16;
}

// The 8 activations of one lane for one span (logical k0 .. k0 + 7) of one token row.
template <class T>
__device__ __forceinline__ void load_span_activations(const T* row, int64_t k0,
                                                      const GemmProblem& p, const int32_t* k_source,
                                                      bool vector_ok, uint32_t b[4]) {
  if (row == nullptr) {
    b[0] = b[1] = b[2] = b[3] = 0;
    return;
  }
  if (k_source) {
    const int4 s0 = *reinterpret_cast<const int4*>(k_source + k0);
    const int4 s1 = *reinterpret_cast<const int4*>(k_source + k0 + 4);
    const int src[8] = {s0.x, s0.y, s0.z, s0.w, s1.x, s1.y, s1.z, s1.w};
    T v[8];
#pragma unroll
    for (int i = 0; i < 8; ++i) v[i] = src[i] >= 0 ? row[src[i]] : MmaType<T>::from_float(0.f);
#pragma unroll
    for (int i = 0; i < 4; ++i) b[i] = pack2(v[2 * i], v[2 * i + 1]);
    return;
  }
  if (vector_ok && k0 + 8 <= p.w.K) {
    const uint4 v = *reinterpret_cast<const uint4*>(row + k0);
    b[0] = v.x, b[1] = v.y, b[2] = v.z, b[3] = v.w;
    return;
  }
  T v[8];
#pragma unroll
  for (int i = 0; i < 8; ++i) v[i] = k0 + i < p.w.K ? row[k0 + i] : MmaType<T>::from_float(0.f);
#pragma unroll
  for (int i = 0; i < 4; ++i) b[i] = pack2(v[2 * i], v[2 * i + 1]);
}

// One warp: its strip's chunks [c_begin, c_end) against kFrags fragments of 8 token rows.
// Each iteration loads all its activations before its mma chain: no load sits between two
// dependent mma.
template <class T, WeightElement kElem, int BM>
__device__ __forceinline__ void general_k_loop(const GemmProblem& p, int e, int64_t strip,
                                               int c_begin, int c_end, int lane,
                                               const T* const (&rows)[BM / 8], bool vector_ok,
                                               uint32_t code_ring, float (&acc)[BM / 8][4]) {
  constexpr int kFrags = BM / 8;
  constexpr int kSpansPerChunk = spans_per_chunk(kElem);
  constexpr int kChunksPerIter = chunks_per_iteration<kElem, BM>();
  constexpr int kSpansPerIter = kChunksPerIter * kSpansPerChunk;
  const PackedWeightView& w = p.w;
  const int g = lane / 4, t = lane % 4;

  const uint4* codes = static_cast<const uint4*>(w.codes) +
                       ((int64_t(e) * w.strips + strip) * w.chunks) * kLanes + lane;
  const int32_t* k_source = w.k_source ? w.k_source + int64_t(e) * w.K_pad : nullptr;
  const int32_t* span_group =
      w.span_group ? w.span_group + int64_t(e) * (w.K_pad / kSpanK) : nullptr;
  constexpr int group_stride = kGroupPairStride;
  const int64_t first = group_pair_index(e, strip, 0, g, w.strips, w.groups);
  const uint32_t* scale_base = w.scale_pairs + first;
  const uint16_t* zero_base = w.zero_pairs ? w.zero_pairs + first : nullptr;
  const int last_group = int(w.groups) - 1;
  const int spans_per_group = int(w.spans_per_group);

  // Group cursor, in whole spans (groups are multiples of a span): no division in the loop.
  // Without act-order the next group's scale and zeros are fetched a group ahead.
  int span = c_begin * kSpansPerChunk;
  const int last_span = c_end * kSpansPerChunk - 1;
  int grp = span_group ? span_group[span] : span / spans_per_group;
  int left = spans_per_group - span % spans_per_group;
  GroupParams cur = decode_group<T>(
      load_group<kElem>(scale_base, zero_base, min(grp, last_group) * group_stride), w.scales_bf16);
  RawGroup ahead =
      load_group<kElem>(scale_base, zero_base, min(grp + 1, last_group) * group_stride);

  float part[kFrags][4];
#pragma unroll
  for (int f = 0; f < kFrags; ++f) part[f][0] = part[f][1] = part[f][2] = part[f][3] = 0.f;

  // This lane's code slots; stage of iteration it = it % kCodeStages.
  using Ring = WarpRing<kElem, BM>;
  constexpr int kCodeLead = Ring::kCodeStages - 1;
  const uint32_t code_slots = code_ring + lane * 16;
  auto issue_codes = [&](int it) {
    const int first = c_begin + it * kChunksPerIter;
    const uint32_t slot = code_slots + (it % Ring::kCodeStages) * Ring::kCodeStageBytes;
#pragma unroll
    for (int u = 0; u < kChunksPerIter; ++u)
      if (first + u < c_end)
        copy_async16(slot + u * Ring::kSlotBytes, codes + (first + u) * kLanes);
  };
#pragma unroll
  for (int it = 0; it < kCodeLead; ++it) {
    issue_codes(it);
    copy_async_commit();
  }

  for (int c0 = c_begin, it = 0; c0 < c_end; c0 += kChunksPerIter, ++it) {
    // Refills the stages read in the previous iteration.
    issue_codes(it + kCodeLead);
    copy_async_commit();
    copy_async_wait<kCodeLead>();
    uint4 now[kChunksPerIter];
    const uint32_t code_slot = code_slots + (it % Ring::kCodeStages) * Ring::kCodeStageBytes;
#pragma unroll
    for (int u = 0; u < kChunksPerIter; ++u)
      now[u] = load_shared16(code_slot + u * Ring::kSlotBytes);
    uint32_t b[kSpansPerIter][kFrags][4];
#pragma unroll
    for (int i = 0; i < kSpansPerIter; ++i) {
      const int k0 = (c0 * kSpansPerChunk + i) * kSpanK + 8 * t;
      const bool inside = c0 + i / kSpansPerChunk < c_end;
#pragma unroll
      for (int f = 0; f < kFrags; ++f)
        load_span_activations<T>(inside ? rows[f] : nullptr, k0, p, k_source, vector_ok, b[i][f]);
    }
#pragma unroll
    for (int i = 0; i < kSpansPerIter; ++i) {
      const int u = i / kSpansPerChunk, s = i % kSpansPerChunk;
      if (c0 + u >= c_end) break;
      span_mma<T, kElem, kFrags>(now[u], s, cur.zeros, b[i], part);
      int next_grp = grp + 1;
      bool flush;
      if (span_group) {
        next_grp = span < last_span ? span_group[span + 1] : grp;
        flush = span == last_span || next_grp != grp;
      } else {
        flush = --left == 0 || span == last_span;
      }
      if (flush) {
        flush_group(cur.scale, part, acc);
        grp = next_grp;
        left = spans_per_group;
        if (span_group)
          ahead = load_group<kElem>(scale_base, zero_base, min(grp, last_group) * group_stride);
        cur = decode_group<T>(ahead, w.scales_bf16);
        if (!span_group)
          ahead = load_group<kElem>(scale_base, zero_base, min(grp + 1, last_group) * group_stride);
      }
      ++span;
    }
  }
}

}  // namespace qmoe::cuda_mma
