#include "backend/cuda_wgmma/routing_glue.hpp"

#include "backend/cuda_wgmma/grouped_gemm.hpp"
#include "cuda/half_types.cuh"
#include "cuda/int4_code_order.hpp"

namespace qmoe::cuda_wgmma {

namespace {

constexpr int kThreads = 256;
constexpr int kVec = 8;  // 16-bit elements per 16-byte access

// The expert owning sorted row r: the last e with expert_offsets[e] <= r (empty experts share
// their offset with the next one, which is the owner).
__device__ int expert_of_row(const int32_t* offsets, int E, int r) {
  int lo = 0, hi = E - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (offsets[mid] <= r)
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}

// Columns c .. c + 7 (c a multiple of 8) of a row in the shared int4 order: four pairs of
// channels, each pair adjacent in the source row (cuda/int4_code_order.hpp).
template <class T>
__device__ __forceinline__ void load_span_columns(const T* src, int64_t c, float v[kVec]) {
  const int64_t span = c / int4_order::kSpan * int4_order::kSpan;
  const int q = int(c - span);
#pragma unroll
  for (int i = 0; i < kVec; i += 2) {
    cuda::load_f32<T, 2>(src + span + int4_order::span_column_k(q + i), v + i);
  }
}

// One block per sorted row (grid-stride over rows), threads across the row in 16-byte vectors;
// with a channel order, each vector's elements are read one by one from their channels; in the
// shared int4 order, as four pairs.
template <class T>
__global__ void gather_rows(const T* hidden, int64_t H, const int32_t* sorted_pair_ids, int top_k,
                            const float* pair_weights, const int32_t* channels, bool span_order,
                            const int32_t* expert_offsets, int E, int64_t max_rows, T* rows) {
  const int64_t count = expert_offsets[E];
  for (int64_t r = blockIdx.x; r < count && r < max_rows; r += gridDim.x) {
    const int32_t pair = sorted_pair_ids[r];
    const T* src = hidden + int64_t(pair / top_k) * H;
    T* dst = rows + r * H;
    const float w = pair_weights ? pair_weights[pair] : 1.0f;
    const int32_t* order =
        channels ? channels + int64_t(expert_of_row(expert_offsets, E, int(r))) * H : nullptr;
    for (int64_t c = int64_t(threadIdx.x) * kVec; c < H; c += int64_t(blockDim.x) * kVec) {
      if (order) {
        float v[kVec];
#pragma unroll
        for (int i = 0; i < kVec; ++i) v[i] = cuda::to_f32(src[order[c + i]]) * w;
        cuda::store_f32<T, kVec>(dst + c, v);
      } else if (span_order) {
        float v[kVec];
        load_span_columns(src, c, v);
        for (float& x : v) x *= w;
        cuda::store_f32<T, kVec>(dst + c, v);
      } else if (pair_weights) {
        float v[kVec];
        cuda::load_f32<T, kVec>(src + c, v);
        for (float& x : v) x *= w;
        cuda::store_f32<T, kVec>(dst + c, v);
      } else {
        *reinterpret_cast<cuda::Vec<T, kVec>*>(dst + c) =
            *reinterpret_cast<const cuda::Vec<T, kVec>*>(src + c);
      }
    }
  }
}

__device__ void set_group(GroupArgs g, int e, int N, int rows, int K, const uint16_t* act,
                          uint16_t* out, int64_t first) {
  auto* shapes = static_cast<int32_t*>(g.shapes);
  shapes[3 * e + 0] = N;
  shapes[3 * e + 1] = rows;
  shapes[3 * e + 2] = K;
  g.act_rows[e] = act + first * K;
  g.out_rows[e] = out + first * N;
}

__global__ void fill_group_args(const int32_t* expert_offsets, int E, int N, int K,
                                const uint16_t* act, uint16_t* out, LaunchArgs to) {
  for (int e = int(threadIdx.x); e < E; e += blockDim.x) {
    const int64_t first = expert_offsets[e];
    const int rows = expert_offsets[e + 1] - expert_offsets[e];
    const int whole = rows / kTileTokens[0] * kTileTokens[0], rest = rows - whole;
    const int tail = remainder_launch(rest);  // launch 0 also takes a remainder no tile holds
    const int in_first = tail == 0 ? rows : whole;
    set_group(to.launch[0], e, N, in_first, K, act, out, first);
#pragma unroll
    for (int i = 1; i < kLaunches; ++i)
      set_group(to.launch[i], e, N, i == tail ? rest : 0, K, act, out, first + whole);
  }
}

template <class T>
__global__ void add_expert_bias(T* rows, int64_t N, const float* bias,
                                const int32_t* expert_offsets, int E, int64_t max_rows) {
  const int64_t count = expert_offsets[E];
  for (int64_t r = blockIdx.x; r < count && r < max_rows; r += gridDim.x) {
    const float* b = bias + int64_t(expert_of_row(expert_offsets, E, int(r))) * N;
    T* row = rows + r * N;
    for (int64_t c = threadIdx.x; c < N; c += blockDim.x)
      row[c] = cuda::from_f32<T>(cuda::to_f32(row[c]) + b[c]);
  }
}

// One thread per (row, group), reading the group in 16-byte vectors: groups are whole multiples of
// 64 channels, so a vector never straddles two of them, and the sums come out in [row, g] order.
template <class T>
__global__ void group_sums(const T* in, int64_t K, int group, int G, const int32_t* expert_offsets,
                           int E, int64_t max_rows, float* sums) {
  const int64_t count = min(int64_t(expert_offsets[E]), max_rows) * G;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += int64_t(gridDim.x) * blockDim.x) {
    const T* x = in + (i / G) * K + (i % G) * group;
    float s = 0.0f;
    for (int k = 0; k < group; k += kVec) {
      float v[kVec];
      cuda::load_f32<T, kVec>(x + k, v);
#pragma unroll
      for (int j = 0; j < kVec; ++j) s += v[j];
    }
    sums[i] = s;
  }
}

// add_zero_terms is, per expert, out[rows_e, N] += sums[rows_e, G] x zero_terms[e][G, N]: a small
// GEMM with K = G, done on CUDA cores in f32 (exact zero terms, one rounding of the output). A
// block owns a tile of kZtRows sorted rows x kZtCols columns; each thread keeps 8 rows x 8 columns
// of it in registers and reads 4 x 16 bytes of shared memory per 64 FMAs. Sorted rows of a tile can
// belong to several experts: the tile runs once per expert in it, with the other rows' sums zeroed.
// The blocks are short, so latency decides their speed (bench/NOTES.md): the accumulators start as
// the output tile itself, loaded before anything else so that its reads overlap the zero terms'.
constexpr int kZtRows = 64, kZtCols = 128, kZtG = 32, kZtThreads = 128;
constexpr int kZtColThreads = kZtCols / 8;  // 16 threads across the columns, 8 across the rows

template <class T>
__global__ void __launch_bounds__(kZtThreads, 3)
    add_zero_terms(T* out, int64_t N, const float* sums, int G, const float* zero_terms,
                   const int32_t* row_experts, const int32_t* expert_offsets, int E,
                   int64_t max_rows) {
  __shared__ alignas(16) float tile_sums[kZtG][kZtRows];   // [g][row]
  __shared__ alignas(16) float tile_terms[kZtG][kZtCols];  // [g][column]
  __shared__ int row_expert[kZtRows];
  const int64_t count = min(int64_t(expert_offsets[E]), max_rows);
  const int64_t first = int64_t(blockIdx.x) * kZtRows;
  if (first >= count) return;
  const int rows = int(min(int64_t(kZtRows), count - first));
  const int64_t n0 = int64_t(blockIdx.y) * kZtCols;
  const int t = int(threadIdx.x);
  // Thread (tr, tc): rows tr*8 .. tr*8+7; columns tc*4 .. +3 and 64 + tc*4 .. +3, so that a warp's
  // 16-byte shared loads of one g are contiguous (no bank conflicts). N is a multiple of 16 (the
  // descriptor's n_multiple), so a 4-column vector is all in or all out.
  const int tr = t / kZtColThreads, tc = t % kZtColThreads;
  if (t < kZtRows) row_expert[t] = t < rows ? row_experts[first + t] : -1;
  float acc[8][8];
#pragma unroll
  for (int i = 0; i < 8; ++i)
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int64_t n = n0 + 64 * half + tc * 4;
      if (tr * 8 + i < rows && n < N) {
        cuda::load_f32<T, 4>(out + (first + tr * 8 + i) * N + n, &acc[i][4 * half]);
      } else {
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][4 * half + j] = 0.0f;
      }
    }
  __syncthreads();
  const int e_first = row_expert[0], e_last = row_expert[rows - 1];

  for (int e = e_first; e <= e_last; ++e) {
    if (expert_offsets[e] == expert_offsets[e + 1]) continue;
    const float* terms = zero_terms + int64_t(e) * G * N;
    for (int g0 = 0; g0 < G; g0 += kZtG) {
      const int chunk = min(kZtG, G - g0);
      __syncthreads();
      // Consecutive threads take consecutive rows of one g: conflict-free shared stores.
      for (int i = t; i < chunk * kZtRows; i += kZtThreads) {
        const int row = i % kZtRows, g = i / kZtRows;
        const bool take = row < rows && row_expert[row] == e;
        tile_sums[g][row] = take ? sums[(first + row) * G + g0 + g] : 0.0f;
      }
      for (int i = t; i < chunk * kZtCols / 4; i += kZtThreads) {
        const int g = i / (kZtCols / 4), c = 4 * (i % (kZtCols / 4));
        *reinterpret_cast<float4*>(&tile_terms[g][c]) =
            n0 + c < N ? *reinterpret_cast<const float4*>(terms + int64_t(g0 + g) * N + n0 + c)
                       : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      }
      __syncthreads();
#pragma unroll 4
      for (int g = 0; g < chunk; ++g) {
        const float4 s0 = *reinterpret_cast<const float4*>(&tile_sums[g][tr * 8]);
        const float4 s1 = *reinterpret_cast<const float4*>(&tile_sums[g][tr * 8 + 4]);
        const float4 z0 = *reinterpret_cast<const float4*>(&tile_terms[g][tc * 4]);
        const float4 z1 = *reinterpret_cast<const float4*>(&tile_terms[g][64 + tc * 4]);
        const float sv[8] = {s0.x, s0.y, s0.z, s0.w, s1.x, s1.y, s1.z, s1.w};
        const float zv[8] = {z0.x, z0.y, z0.z, z0.w, z1.x, z1.y, z1.z, z1.w};
#pragma unroll
        for (int i = 0; i < 8; ++i)
#pragma unroll
          for (int j = 0; j < 8; ++j) acc[i][j] = fmaf(sv[i], zv[j], acc[i][j]);
      }
    }
  }
#pragma unroll
  for (int i = 0; i < 8; ++i)
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int64_t n = n0 + 64 * half + tc * 4;
      if (tr * 8 + i < rows && n < N)
        cuda::store_f32<T, 4>(out + (first + tr * 8 + i) * N + n, &acc[i][4 * half]);
    }
}

unsigned row_blocks(int64_t max_rows) {
  return unsigned(max_rows < 65535 ? (max_rows > 0 ? max_rows : 1) : 65535);
}

}  // namespace

cudaError_t group_sums_cuda(DType dtype, const void* in, int64_t K, int64_t group,
                            const int32_t* expert_offsets, int64_t E, int64_t max_rows, float* sums,
                            cudaStream_t stream) {
  if (group % kVec != 0 || max_rows < 1) return cudaErrorInvalidValue;
  const int G = int(K / group);
  const unsigned blocks = row_blocks((max_rows * G + kThreads - 1) / kThreads);
  if (dtype == DType::bf16) {
    group_sums<<<blocks, kThreads, 0, stream>>>(static_cast<const __nv_bfloat16*>(in), K,
                                                int(group), G, expert_offsets, int(E), max_rows,
                                                sums);
  } else if (dtype == DType::f16) {
    group_sums<<<blocks, kThreads, 0, stream>>>(static_cast<const __half*>(in), K, int(group), G,
                                                expert_offsets, int(E), max_rows, sums);
  } else {
    return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

cudaError_t add_zero_terms_cuda(DType dtype, void* out, int64_t N, const float* sums, int64_t G,
                                const float* zero_terms, const int32_t* row_experts,
                                const int32_t* expert_offsets, int64_t E, int64_t max_rows,
                                cudaStream_t stream) {
  if (max_rows < 1 || N % 16 != 0) return cudaErrorInvalidValue;
  const dim3 grid(unsigned((max_rows + kZtRows - 1) / kZtRows),
                  unsigned((N + kZtCols - 1) / kZtCols));
  if (dtype == DType::bf16) {
    add_zero_terms<<<grid, kZtThreads, 0, stream>>>(static_cast<__nv_bfloat16*>(out), N, sums,
                                                    int(G), zero_terms, row_experts, expert_offsets,
                                                    int(E), max_rows);
  } else if (dtype == DType::f16) {
    add_zero_terms<<<grid, kZtThreads, 0, stream>>>(static_cast<__half*>(out), N, sums, int(G),
                                                    zero_terms, row_experts, expert_offsets, int(E),
                                                    max_rows);
  } else {
    return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

cudaError_t gather_rows_cuda(DType dtype, const void* hidden, int64_t H,
                             const int32_t* sorted_pair_ids, int top_k, const float* pair_weights,
                             const int32_t* channels, bool span_order,
                             const int32_t* expert_offsets, int64_t E, int64_t max_rows, void* rows,
                             cudaStream_t stream) {
  if (H % kVec != 0 || (span_order && H % int4_order::kSpan != 0)) return cudaErrorInvalidValue;
  const unsigned blocks = row_blocks(max_rows);
  if (dtype == DType::bf16) {
    gather_rows<<<blocks, kThreads, 0, stream>>>(
        static_cast<const __nv_bfloat16*>(hidden), H, sorted_pair_ids, top_k, pair_weights,
        channels, span_order, expert_offsets, int(E), max_rows, static_cast<__nv_bfloat16*>(rows));
  } else if (dtype == DType::f16) {
    gather_rows<<<blocks, kThreads, 0, stream>>>(
        static_cast<const __half*>(hidden), H, sorted_pair_ids, top_k, pair_weights, channels,
        span_order, expert_offsets, int(E), max_rows, static_cast<__half*>(rows));
  } else {
    return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

cudaError_t fill_group_args_cuda(const int32_t* expert_offsets, int64_t E, int64_t N, int64_t K,
                                 const void* act, void* out, const LaunchArgs& launches,
                                 cudaStream_t stream) {
  fill_group_args<<<1, kThreads, 0, stream>>>(expert_offsets, int(E), int(N), int(K),
                                              static_cast<const uint16_t*>(act),
                                              static_cast<uint16_t*>(out), launches);
  return cudaGetLastError();
}

cudaError_t add_expert_bias_cuda(DType dtype, void* rows, int64_t N, const float* bias,
                                 const int32_t* expert_offsets, int64_t E, int64_t max_rows,
                                 cudaStream_t stream) {
  const unsigned blocks = row_blocks(max_rows);
  if (dtype == DType::bf16) {
    add_expert_bias<<<blocks, kThreads, 0, stream>>>(static_cast<__nv_bfloat16*>(rows), N, bias,
                                                     expert_offsets, int(E), max_rows);
  } else if (dtype == DType::f16) {
    add_expert_bias<<<blocks, kThreads, 0, stream>>>(static_cast<__half*>(rows), N, bias,
                                                     expert_offsets, int(E), max_rows);
  } else {
    return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

}  // namespace qmoe::cuda_wgmma
