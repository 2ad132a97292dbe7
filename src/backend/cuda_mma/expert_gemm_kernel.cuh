#pragma once
// The expert GEMM kernel (see expert_gemm.hpp for the contract, layout.hpp for the weights).
//
// Persistent CTAs of 8 warps walk the flat list of work items (tile of sorted rows, N tile).
// A work item is `strips_per_cta` strips of 16 weight rows; its 8 warps are strips_per_cta
// strips x warps_k K slices. Each warp streams its strip's codes for its K slice straight from
// global memory into registers (16-byte loads, one per lane per chunk, next chunks in flight
// while the current ones are multiplied), dequantizes in registers and runs mma.m16n8k16 with
// the 16 weight rows as A and 8 tokens per fragment as B. Per group, products accumulate in a
// separate fp32 fragment that is scaled once (fp32) into the result, so the codes enter the mma
// as exact integers. The warps_k partial results meet in shared memory and are summed in a fixed
// order (deterministic), then the epilogue applies router weight and bias and stores T.
#include <cuda_runtime_api.h>

#include "backend/cuda_mma/expert_gemm.hpp"
#include "backend/cuda_mma/mma_primitives.cuh"

namespace qmoe::cuda_mma {

inline constexpr int kWarps = 8;
inline constexpr int kThreads = kWarps * 32;
inline constexpr int kStages = 4;      // codes ring depth per warp: 3 iterations in flight
inline constexpr int kRedStride = 20;  // floats per token row of the reduction buffer: 16 + 4
                                       // keeps the 4 lanes of a quad on different banks

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

// A group's scale pair and zero pair as loaded, and as the dequantization uses them. Loads go
// into Raw a group ahead; they are decoded only when their group starts, so no warp waits on a
// scale load in the middle of its mma chain.
struct RawGroup {
  uint32_t scales, zeros;
};

template <class T, int BITS>
struct GroupParams {
  float2 scale;
  ZeroOffsets zeros;
};

__device__ __forceinline__ RawGroup load_group(const uint32_t* scale_base,
                                               const uint16_t* zero_base, int64_t at, int bits) {
  const uint32_t mid = 1u << (bits - 1);
  return {scale_base[at], zero_base ? uint32_t(zero_base[at]) : mid | mid << 8};
}

template <class T, int BITS>
__device__ __forceinline__ GroupParams<T, BITS> decode_group(RawGroup raw, bool bf16_scales) {
  return {unpack_scales(raw.scales, bf16_scales),
          zero_offsets<T, BITS>(raw.zeros & 0xff, raw.zeros >> 8)};
}

// Chunks a warp multiplies per iteration: 2 KB of int4 codes at decode, fewer for large tiles,
// whose registers go to accumulators and to the iteration's activations.
template <int BITS, int BM>
__host__ __device__ constexpr int chunks_per_iteration() {
  constexpr int spans = BM == 8 ? 8 : BM == 16 ? 4 : 2;
  return BITS == 4 ? (spans / 2 > 0 ? spans / 2 : 1) : (spans < 4 ? spans : 4);
}

// One warp: its strip's chunks [c_begin, c_end) against kFrags fragments of 8 token rows.
// PLAIN: no act-order and every activation this warp reads lies inside K with 16-byte aligned
// rows, so each lane's 8 activations of a span are one vector load and groups advance by count.
// The codes stream through a warp-private ring in shared memory (cp.async, kStages iterations
// deep): kStages - 1 iterations of codes are in flight while one is multiplied, without holding
// registers (each lane copies and later reads only its own 16 bytes, so no barrier is needed).
// Each iteration issues its activation loads before its mma chain: no load sits between two
// dependent mma.
template <class T, int BITS, int BM, bool PLAIN>
__device__ __forceinline__ void warp_k_loop(const GemmProblem& p, int e, int64_t strip, int c_begin,
                                            int c_end, int lane, const T* const (&rows)[BM / 8],
                                            bool vector_ok, uint4* ring_sh,
                                            float (&acc)[BM / 8][4]) {
  constexpr int kFrags = BM / 8;
  constexpr int kSpansPerChunk = spans_per_chunk(BITS);
  constexpr int kChunksPerIter = chunks_per_iteration<BITS, BM>();
  constexpr int kSpansPerIter = kChunksPerIter * kSpansPerChunk;
  constexpr int kWordsPerStep = BITS == 4 ? 1 : 2;
  const PackedWeightView& w = p.w;
  const int g = lane / 4, t = lane % 4;

  const uint4* codes = static_cast<const uint4*>(w.codes) +
                       ((int64_t(e) * w.strips + strip) * w.chunks) * kLanes + lane;
  const int32_t* k_source = PLAIN        ? nullptr
                            : w.k_source ? w.k_source + int64_t(e) * w.K_pad
                                         : nullptr;
  const int32_t* span_group = PLAIN          ? nullptr
                              : w.span_group ? w.span_group + int64_t(e) * (w.K_pad / kSpanK)
                                             : nullptr;
  const int64_t group_stride = w.strips * 8;
  const uint32_t* scale_base = w.scale_pairs + int64_t(e) * w.groups * group_stride + strip * 8 + g;
  const uint16_t* zero_base =
      w.zero_pairs ? w.zero_pairs + int64_t(e) * w.groups * group_stride + strip * 8 + g : nullptr;
  const int last_group = int(w.groups) - 1;
  const int spans_per_group = int(w.spans_per_group);

  // Group cursor, in whole spans (groups are multiples of a span): no division in the loop.
  // Without act-order the next group's scale and zeros are fetched a group ahead.
  int span = c_begin * kSpansPerChunk;
  const int last_span = c_end * kSpansPerChunk - 1;
  int grp = span_group ? span_group[span] : span / spans_per_group;
  int left = spans_per_group - span % spans_per_group;
  GroupParams<T, BITS> cur = decode_group<T, BITS>(
      load_group(scale_base, zero_base, min(grp, last_group) * group_stride, BITS), w.scales_bf16);
  RawGroup ahead = load_group(scale_base, zero_base, min(grp + 1, last_group) * group_stride, BITS);

  float part[kFrags][4];
#pragma unroll
  for (int f = 0; f < kFrags; ++f) part[f][0] = part[f][1] = part[f][2] = part[f][3] = 0.f;

  uint4* ring = ring_sh + lane;  // [kStages][kChunksPerIter][32 lanes]
  auto issue = [&](int it) {
    const int first = c_begin + it * kChunksPerIter;
    uint4* slot = ring + (it % kStages) * kChunksPerIter * kLanes;
#pragma unroll
    for (int u = 0; u < kChunksPerIter; ++u)
      if (first + u < c_end) copy_async16(slot + u * kLanes, codes + (first + u) * kLanes);
    copy_async_commit();
  };
#pragma unroll
  for (int it = 0; it < kStages - 1; ++it) issue(it);

  for (int c0 = c_begin, it = 0; c0 < c_end; c0 += kChunksPerIter, ++it) {
    issue(it + kStages - 1);  // refills the slot read in the previous iteration
    copy_async_wait<kStages - 1>();
    uint4 now[kChunksPerIter];
    const uint4* slot = ring + (it % kStages) * kChunksPerIter * kLanes;
#pragma unroll
    for (int u = 0; u < kChunksPerIter; ++u) now[u] = slot[u * kLanes];
    // The next iteration's activations, one 128-byte line per lane and row, into L1 (GEMM2
    // reads rows GEMM1 just wrote, from L2): its loads below then wait for L1, not L2.
    constexpr int kLinesPerIter = kSpansPerIter * kSpanK * int(sizeof(T)) / 128;
    if (PLAIN && t < kLinesPerIter && c0 + kChunksPerIter + t * 64 / chunk_k(BITS) < c_end) {
#pragma unroll
      for (int f = 0; f < kFrags; ++f)
        if (rows[f])
          prefetch_l1(rows[f] + ((c0 + kChunksPerIter) * kSpansPerChunk * kSpanK + t * 64));
    }
    uint32_t b[kSpansPerIter][kFrags][4];
#pragma unroll
    for (int i = 0; i < kSpansPerIter; ++i) {
      const int k0 = (c0 * kSpansPerChunk + i) * kSpanK + 8 * t;
      const bool inside = c0 + i / kSpansPerChunk < c_end;
#pragma unroll
      for (int f = 0; f < kFrags; ++f) {
        if (PLAIN) {
          uint4 v = make_uint4(0, 0, 0, 0);
          if (rows[f] && inside) v = *reinterpret_cast<const uint4*>(rows[f] + k0);
          b[i][f][0] = v.x, b[i][f][1] = v.y, b[i][f][2] = v.z, b[i][f][3] = v.w;
        } else {
          load_span_activations<T>(inside ? rows[f] : nullptr, k0, p, k_source, vector_ok, b[i][f]);
        }
      }
    }
#pragma unroll
    for (int i = 0; i < kSpansPerIter; ++i) {
      const int u = i / kSpansPerChunk, s = i % kSpansPerChunk;
      if (c0 + u >= c_end) break;
      const uint32_t* words = reinterpret_cast<const uint32_t*>(&now[u]);
#pragma unroll
      for (int jj = 0; jj < 2; ++jj) {
        uint32_t a[4];
        Dequant<T, BITS>::step(words + (s * 2 + jj) * kWordsPerStep, cur.zeros, a);
#pragma unroll
        for (int f = 0; f < kFrags; ++f)
          MmaType<T>::mma(part[f], a, b[i][f][2 * jj], b[i][f][2 * jj + 1]);
      }
      int next_grp = grp + 1;
      bool flush;
      if (span_group) {
        next_grp = span < last_span ? span_group[span + 1] : grp;
        flush = span == last_span || next_grp != grp;
      } else {
        flush = --left == 0 || span == last_span;
      }
      if (flush) {
#pragma unroll
        for (int f = 0; f < kFrags; ++f) {
          acc[f][0] += cur.scale.x * part[f][0], acc[f][1] += cur.scale.x * part[f][1];
          acc[f][2] += cur.scale.y * part[f][2], acc[f][3] += cur.scale.y * part[f][3];
          part[f][0] = part[f][1] = part[f][2] = part[f][3] = 0.f;
        }
        grp = next_grp;
        left = spans_per_group;
        if (span_group)
          ahead = load_group(scale_base, zero_base, min(grp, last_group) * group_stride, BITS);
        cur = decode_group<T, BITS>(ahead, w.scales_bf16);
        if (!span_group)
          ahead = load_group(scale_base, zero_base, min(grp + 1, last_group) * group_stride, BITS);
      }
      ++span;
    }
  }
}

template <class T, int BITS, int BM>
__global__ void __launch_bounds__(kThreads, BM <= 16 ? 2 : 1)
    expert_gemm_kernel(const GemmProblem p, const int strips_per_cta, const int warps_k) {
  constexpr int kFrags = BM / 8;
  constexpr int kRingChunks = kStages * chunks_per_iteration<BITS, BM>() * kLanes;
  extern __shared__ uint4 shared_sh[];  // codes rings [warp][kRingChunks], then red_sh
  float* red_sh =
      reinterpret_cast<float*>(shared_sh + kWarps * kRingChunks);  // [warp][BM][kRedStride]

  const PackedWeightView& w = p.w;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int n_tiles = int((w.strips + strips_per_cta - 1) / strips_per_cta);
  const int tiles = *p.padded_total / BM;
  const int items = tiles * n_tiles;
  const bool vector_ok =
      (w.K % 8 == 0) && (p.a_stride % 8 == 0) && (reinterpret_cast<uintptr_t>(p.a) % 16 == 0);
  const bool plain = vector_ok && !w.k_source;
  const int chunks_per_warp = int((w.chunks + warps_k - 1) / warps_k);
  const int full_chunks = int(w.K / chunk_k(BITS));  // chunks whose activations all lie inside K
  const T* a_gl = static_cast<const T*>(p.a);
  const int tile_n = strips_per_cta * kStripRows;
  const int tile_n_log2 = __ffs(tile_n) - 1;  // strips_per_cta is a power of two

  for (int item = blockIdx.x; item < items; item += gridDim.x) {
    const int tile = item % tiles, n_tile = item / tiles;
    const int e = p.tile_experts[tile];
    const int64_t strip = int64_t(n_tile) * strips_per_cta + warp / warps_k;
    const int kw = warp % warps_k;

    // This lane's token row per fragment (B column g).
    const T* rows[kFrags];
#pragma unroll
    for (int f = 0; f < kFrags; ++f) {
      const int r = tile * BM + 8 * f + g;
      const int32_t pair = p.sorted_pair_ids[r];
      const int64_t src = p.a_rows_are_tokens ? pair / p.top_k : r;
      rows[f] = pair < p.num_pairs ? a_gl + src * p.a_stride : nullptr;
    }

    float acc[kFrags][4];
#pragma unroll
    for (int f = 0; f < kFrags; ++f) acc[f][0] = acc[f][1] = acc[f][2] = acc[f][3] = 0.f;

    const int c_begin = kw * chunks_per_warp;
    const int c_end = min(int(w.chunks), c_begin + chunks_per_warp);
    if (e >= 0 && strip < w.strips && c_begin < c_end) {
      if (plain && c_end <= full_chunks)
        warp_k_loop<T, BITS, BM, true>(p, e, strip, c_begin, c_end, lane, rows, vector_ok,
                                       shared_sh + warp * kRingChunks, acc);
      else
        warp_k_loop<T, BITS, BM, false>(p, e, strip, c_begin, c_end, lane, rows, vector_ok,
                                        shared_sh + warp * kRingChunks, acc);
    }

    // C fragment: c0, c1 = (row g, tokens 2t, 2t+1), c2, c3 = (row g + 8, same tokens).
    __syncthreads();  // the previous item's epilogue has finished reading red_sh
    float* mine = red_sh + warp * BM * kRedStride;
#pragma unroll
    for (int f = 0; f < kFrags; ++f) {
      const int tok = 8 * f + 2 * t;
      mine[tok * kRedStride + g] = acc[f][0];
      mine[(tok + 1) * kRedStride + g] = acc[f][1];
      mine[tok * kRedStride + g + 8] = acc[f][2];
      mine[(tok + 1) * kRedStride + g + 8] = acc[f][3];
    }
    __syncthreads();

    T* out = static_cast<T*>(p.out);
    for (int i = threadIdx.x; i < tile_n * BM; i += kThreads) {
      const int n_local = i & (tile_n - 1), tok = i >> tile_n_log2;
      const int64_t n = int64_t(n_tile) * tile_n + n_local;
      const int r = tile * BM + tok;
      const int32_t pair = p.sorted_pair_ids[r];
      if (n >= w.N || pair >= p.num_pairs || e < 0) continue;
      const int first_warp = (n_local / kStripRows) * warps_k, row = n_local % kStripRows;
      float v = 0.f;
      for (int kwi = 0; kwi < warps_k; ++kwi)
        v += red_sh[((first_warp + kwi) * BM + tok) * kRedStride + row];
      if (p.topk_weights) v *= p.topk_weights[pair];
      if (w.bias) v += w.bias[int64_t(e) * w.N + n];
      out[int64_t(r) * p.out_stride + n] = MmaType<T>::from_float(v);
    }
  }
}

template <int BITS, int BM>
constexpr size_t expert_gemm_shared_bytes() {
  return size_t(kWarps) * kStages * chunks_per_iteration<BITS, BM>() * kLanes * sizeof(uint4) +
         size_t(kWarps) * BM * kRedStride * sizeof(float);
}

// Above 48 KB of dynamic shared memory a kernel must opt in, once per process and device.
template <class T, int BITS, int BM>
cudaError_t allow_shared_bytes() {
  return cudaFuncSetAttribute(expert_gemm_kernel<T, BITS, BM>,
                              cudaFuncAttributeMaxDynamicSharedMemorySize,
                              int(expert_gemm_shared_bytes<BITS, BM>()));
}

// Calls f.template operator()<BITS, BM>() for the compiled instance of (bits, tile rows):
// 4 or 8 bits, tiles of 8, 16 or 64 rows (choose_tile_rows).
template <class F>
auto with_instance(int bits, int tile_rows, F&& f) {
  const bool int4 = bits == 4;
  switch (tile_rows) {
    case 8: return int4 ? f.template operator()<4, 8>() : f.template operator()<8, 8>();
    case 16: return int4 ? f.template operator()<4, 16>() : f.template operator()<8, 16>();
    default: return int4 ? f.template operator()<4, 64>() : f.template operator()<8, 64>();
  }
}

template <class T>
cudaError_t launch_typed(const GemmProblem& p, const GemmPlan& plan, cudaStream_t stream) {
  if (plan.tile_rows != 8 && plan.tile_rows != 16 && plan.tile_rows != 64)
    return cudaErrorInvalidValue;
  return with_instance(p.w.bits, plan.tile_rows, [&]<int BITS, int BM>() {
    if (const cudaError_t status = allow_shared_bytes<T, BITS, BM>(); status != cudaSuccess)
      return status;
    expert_gemm_kernel<T, BITS, BM>
        <<<plan.grid, kThreads, expert_gemm_shared_bytes<BITS, BM>(), stream>>>(
            p, plan.strips_per_cta, plan.warps_k);
    return cudaGetLastError();
  });
}

template <class T>
int ctas_per_sm_typed(int bits, int tile_rows) {
  return with_instance(bits, tile_rows, [&]<int BITS, int BM>() {
    int n = 0;
    if (allow_shared_bytes<T, BITS, BM>() != cudaSuccess ||
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, expert_gemm_kernel<T, BITS, BM>, kThreads,
                                                      expert_gemm_shared_bytes<BITS, BM>()) !=
            cudaSuccess)
      return 1;
    return n > 0 ? n : 1;
  });
}

}  // namespace qmoe::cuda_mma
