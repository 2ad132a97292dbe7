#pragma once
// The expert GEMM's epilogue pieces: the output activation fixed at compile time, and the store of
// a warp that owns whole strips (expert_gemm_kernel's own_sums): router weight, bias and, for
// GEMM1, the activation applied to the warp's C fragments, stored as T.
#include "backend/cuda_mma/expert_gemm.hpp"
#include "backend/cuda_mma/mma_primitives.cuh"
#include "cuda/activation_math.cuh"

namespace qmoe::cuda_mma {

// Calls f.template operator()<A, kFuse>() for the problem's activation A (kFuse: GEMM1 applies
// it) or for none (kFuse false, A unused), so the epilogue's loops pick it once, not per value.
template <class F>
__device__ __forceinline__ void with_output_activation(const GemmProblem& p, F&& f) {
  if (!p.fuse_activation) {
    f.template operator()<Activation::silu, false>();
    return;
  }
  with_activation(p.activation, [&]<Activation A>() { f.template operator()<A, true>(); });
}

// A warp's sums after router weight and bias, and which of its lane's token rows hold a pair.
// value[j * kFrags + f] is strip j's fragment f in the C layout: x, y = (weight row g, token rows
// 8 f + 2 t and 8 f + 2 t + 1 of the tile), z, w = (row g + 8, the same tokens). The store loops
// index it at run time, which keeps it in local memory (L1): picked out of registers by a
// run-time index instead, each value cost a select per fragment, ~200 instructions a value at
// 48-row pair tiles and 13% of GEMM1's stall samples for Mixtral-8x7B at 128 tokens
// (bench/NOTES.md, session 12).
template <int kRun, int kFrags>
struct FinishedSums {
  float4 value[kRun * kFrags];
  uint32_t live = 0;  // bit 2 f + jj: the lane's token row 8 f + 2 t + jj holds a pair
};

// acc_run[j]: the sums of strip strip + j (a strip past the last is finished too, never stored);
// tile_row: the tile's first sorted row; pair_of(row): its pair, from the problem's alignment or
// the fused one (expert_gemm_kernel.cuh).
template <int kRun, int kFrags, class PairOf>
__device__ __forceinline__ FinishedSums<kRun, kFrags> finish_sums(
    const GemmProblem& p, const PairOf& pair_of, int e, int64_t strip, int tile_row, int lane,
    const float (&acc_run)[kRun][kFrags][4]) {
  const PackedWeightView& w = p.w;
  const int g = lane / 4, row0 = tile_row + 2 * (lane % 4);
  FinishedSums<kRun, kFrags> s;
  float weight[kFrags][2];
#pragma unroll
  for (int f = 0; f < kFrags; ++f)
#pragma unroll
    for (int jj = 0; jj < 2; ++jj) {
      const int32_t pair = pair_of(row0 + 8 * f + jj);
      const bool here = pair < p.num_pairs;
      s.live |= uint32_t(here) << (2 * f + jj);
      weight[f][jj] = p.topk_weights && here ? p.topk_weights[pair] : 1.f;
    }
#pragma unroll
  for (int j = 0; j < kRun; ++j) {
    float bias[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      // Rows past N (a partial last strip, or a strip past the last) have no bias: bias is
      // [E][N].
      const int64_t n = (strip + j) * kStripRows + g + 8 * h;
      bias[h] = w.bias && n < w.N ? w.bias[int64_t(e) * w.N + n] : 0.f;
    }
#pragma unroll
    for (int f = 0; f < kFrags; ++f) {
      const float* c = acc_run[j][f];
      // Multiply, then add, each rounded (no fma): the K-split epilogue rounds so, and an
      // 8-row run must store what its single strips store, bit for bit (strip_runs_test).
      auto finish = [](float sum, float w, float b) { return __fadd_rn(__fmul_rn(sum, w), b); };
      s.value[j * kFrags + f] =
          make_float4(finish(c[0], weight[f][0], bias[0]), finish(c[1], weight[f][1], bias[0]),
                      finish(c[2], weight[f][0], bias[1]), finish(c[3], weight[f][1], bias[1]));
    }
  }
  return s;
}

// Stores s for activation A (kFuse) or none: a gated A writes one output per (gate row g, up
// row g + 8) pair of a strip (repack.hpp's gated_row_order), column (strip + j) x 8 + g of
// act_cols; otherwise rows g and g + 8 of the strip, columns below N.
template <class T, Activation A, bool kFuse, int kRun, int kFrags>
__device__ __forceinline__ void store_finished(const GemmProblem& p, int64_t strip, int run_strips,
                                               int tile_row, int lane,
                                               const FinishedSums<kRun, kFrags>& s) {
  const int g = lane / 4, row0 = tile_row + 2 * (lane % 4);
  T* out = static_cast<T*>(p.out);
  auto store = [&](int i) {
    const int j = i / kFrags, f = i % kFrags;
    const float4 v = s.value[i];
    const float c[4] = {v.x, v.y, v.z, v.w};
    if constexpr (kFuse && gated_kind(A)) {
      const int64_t o = (strip + j) * 8 + g;
      if (o >= p.act_cols) return;
#pragma unroll
      for (int jj = 0; jj < 2; ++jj)
        if (s.live >> (2 * f + jj) & 1)
          out[int64_t(row0 + 8 * f + jj) * p.out_stride + o] =
              MmaType<T>::from_float(gated<A>(c[jj], c[2 + jj], p.activation_params));
    } else {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int64_t n = (strip + j) * kStripRows + g + 8 * h;
        if (n >= p.w.N) continue;
#pragma unroll
        for (int jj = 0; jj < 2; ++jj)
          if (s.live >> (2 * f + jj) & 1)
            out[int64_t(row0 + 8 * f + jj) * p.out_stride + n] =
                MmaType<T>::from_float(kFuse ? single<A>(c[2 * h + jj]) : c[2 * h + jj]);
      }
    }
  };
  // One fragment (8-row tiles): two values, unrolled, stay in registers.
  if constexpr (kFrags == 1) {
#pragma unroll
    for (int i = 0; i < kRun; ++i)
      if (i < run_strips) store(i);
  } else {
#pragma unroll 1
    for (int i = 0; i < run_strips * kFrags; ++i) store(i);
  }
}

template <class T, int kRun, int kFrags, class PairOf>
__device__ __forceinline__ void store_own_sums(const GemmProblem& p, const PairOf& pair_of, int e,
                                               int64_t strip, int run_strips, int tile_row,
                                               int lane, const float (&acc_run)[kRun][kFrags][4]) {
  const FinishedSums<kRun, kFrags> s = finish_sums(p, pair_of, e, strip, tile_row, lane, acc_run);
  with_output_activation(p, [&]<Activation A, bool kFuse>() {
    store_finished<T, A, kFuse>(p, strip, run_strips, tile_row, lane, s);
  });
}

}  // namespace qmoe::cuda_mma
