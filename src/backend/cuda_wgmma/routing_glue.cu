#include "backend/cuda_wgmma/routing_glue.hpp"

#include "cuda/half_types.cuh"

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

// One block per sorted row (grid-stride over rows), threads across the row in 16-byte vectors;
// with a channel order, each vector's elements are read one by one from their channels.
template <class T>
__global__ void gather_rows(const T* hidden, int64_t H, const int32_t* sorted_pair_ids, int top_k,
                            const float* pair_weights, const int32_t* channels,
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

__global__ void fill_group_args(const int32_t* expert_offsets, int E, int N, int K,
                                const uint16_t* act, uint16_t* out, int32_t* shapes,
                                const void** act_rows, void** out_rows) {
  for (int e = int(threadIdx.x); e < E; e += blockDim.x) {
    const int64_t first = expert_offsets[e];
    shapes[3 * e + 0] = N;
    shapes[3 * e + 1] = expert_offsets[e + 1] - expert_offsets[e];
    shapes[3 * e + 2] = K;
    act_rows[e] = act + first * K;
    out_rows[e] = out + first * N;
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

// One block per row; each warp sums whole groups (lanes across the group, then a shuffle).
template <class T>
__global__ void group_sums(const T* in, int64_t K, int group, int G, const int32_t* expert_offsets,
                           int E, int64_t max_rows, float* sums) {
  const int64_t count = expert_offsets[E];
  const int warp = int(threadIdx.x) / 32, lane = int(threadIdx.x) % 32;
  for (int64_t r = blockIdx.x; r < count && r < max_rows; r += gridDim.x) {
    for (int g = warp; g < G; g += int(blockDim.x) / 32) {
      const T* x = in + r * K + int64_t(g) * group;
      float s = 0.0f;
      for (int k = lane; k < group; k += 32) s += cuda::to_f32(x[k]);
      for (int offset = 16; offset > 0; offset /= 2) s += __shfl_xor_sync(0xffffffffu, s, offset);
      if (lane == 0) sums[r * G + g] = s;
    }
  }
}

constexpr int kZeroRows = 32;  // rows per block of add_zero_terms: each zero term read serves them

// Thread n of the block adds, for each of its kZeroRows rows, sum_g sums[r, g] * zero_terms[e, g,
// n]. The rows' sums sit in shared memory as [g][row] so that one g's 32 values are 8 broadcast
// 16-byte loads; rows are sorted by expert, so the block walks its rows' runs of one expert and
// reads each zero term once per run.
template <class T>
__global__ void add_zero_terms(T* out, int64_t N, const float* sums, int G, const float* zero_terms,
                               const int32_t* expert_offsets, int E, int64_t max_rows) {
  extern __shared__ float4 shared_sums[];  // [G][kZeroRows / 4]
  __shared__ int row_expert[kZeroRows];
  float* sums_by_g = reinterpret_cast<float*>(shared_sums);
  const int64_t count = min(int64_t(expert_offsets[E]), max_rows);
  const int64_t first = int64_t(blockIdx.x) * kZeroRows;
  if (first >= count) return;
  const int rows = int(min(int64_t(kZeroRows), count - first));
  for (int i = int(threadIdx.x); i < kZeroRows * G; i += blockDim.x) {
    const int row = i / G, g = i % G;
    sums_by_g[g * kZeroRows + row] = row < rows ? sums[(first + row) * G + g] : 0.0f;
  }
  for (int i = int(threadIdx.x); i < kZeroRows; i += blockDim.x)
    row_expert[i] = i < rows ? expert_of_row(expert_offsets, E, int(first + i)) : -1;
  __syncthreads();
  const int64_t n = int64_t(blockIdx.y) * blockDim.x + threadIdx.x;
  if (n >= N) return;
  float acc[kZeroRows] = {};
  for (int i = 0; i < rows;) {
    const int e = row_expert[i];
    unsigned run = 0;  // the rows of expert e
    for (int j = 0; j < kZeroRows; ++j) run |= unsigned(row_expert[j] == e) << j;
    const float* z = zero_terms + int64_t(e) * G * N + n;
    for (int g = 0; g < G; ++g) {
      const float zg = z[int64_t(g) * N];
      const float4* s4 = shared_sums + g * (kZeroRows / 4);
#pragma unroll
      for (int q = 0; q < kZeroRows / 4; ++q) {
        const float4 v = s4[q];
        acc[4 * q + 0] += (run >> (4 * q + 0) & 1u) ? v.x * zg : 0.0f;
        acc[4 * q + 1] += (run >> (4 * q + 1) & 1u) ? v.y * zg : 0.0f;
        acc[4 * q + 2] += (run >> (4 * q + 2) & 1u) ? v.z * zg : 0.0f;
        acc[4 * q + 3] += (run >> (4 * q + 3) & 1u) ? v.w * zg : 0.0f;
      }
    }
    while (i < rows && row_expert[i] == e) ++i;
  }
#pragma unroll
  for (int j = 0; j < kZeroRows; ++j) {
    if (j < rows) {
      T& y = out[(first + j) * N + n];
      y = cuda::from_f32<T>(cuda::to_f32(y) + acc[j]);
    }
  }
}

unsigned row_blocks(int64_t max_rows) {
  return unsigned(max_rows < 65535 ? (max_rows > 0 ? max_rows : 1) : 65535);
}

}  // namespace

cudaError_t group_sums_cuda(DType dtype, const void* in, int64_t K, int64_t group,
                            const int32_t* expert_offsets, int64_t E, int64_t max_rows, float* sums,
                            cudaStream_t stream) {
  const unsigned blocks = row_blocks(max_rows);
  const int G = int(K / group);
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
                                const float* zero_terms, const int32_t* expert_offsets, int64_t E,
                                int64_t max_rows, cudaStream_t stream) {
  const size_t shared = size_t(kZeroRows) * size_t(G) * sizeof(float);
  if (shared > kZeroTermSharedBytes || max_rows < 1) return cudaErrorInvalidValue;
  const dim3 grid(unsigned((max_rows + kZeroRows - 1) / kZeroRows),
                  unsigned((N + kThreads - 1) / kThreads));
  if (dtype == DType::bf16) {
    add_zero_terms<<<grid, kThreads, shared, stream>>>(static_cast<__nv_bfloat16*>(out), N, sums,
                                                       int(G), zero_terms, expert_offsets, int(E),
                                                       max_rows);
  } else if (dtype == DType::f16) {
    add_zero_terms<<<grid, kThreads, shared, stream>>>(
        static_cast<__half*>(out), N, sums, int(G), zero_terms, expert_offsets, int(E), max_rows);
  } else {
    return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

cudaError_t gather_rows_cuda(DType dtype, const void* hidden, int64_t H,
                             const int32_t* sorted_pair_ids, int top_k, const float* pair_weights,
                             const int32_t* channels, const int32_t* expert_offsets, int64_t E,
                             int64_t max_rows, void* rows, cudaStream_t stream) {
  if (H % kVec != 0) return cudaErrorInvalidValue;
  const unsigned blocks = row_blocks(max_rows);
  if (dtype == DType::bf16) {
    gather_rows<<<blocks, kThreads, 0, stream>>>(
        static_cast<const __nv_bfloat16*>(hidden), H, sorted_pair_ids, top_k, pair_weights,
        channels, expert_offsets, int(E), max_rows, static_cast<__nv_bfloat16*>(rows));
  } else if (dtype == DType::f16) {
    gather_rows<<<blocks, kThreads, 0, stream>>>(
        static_cast<const __half*>(hidden), H, sorted_pair_ids, top_k, pair_weights, channels,
        expert_offsets, int(E), max_rows, static_cast<__half*>(rows));
  } else {
    return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

cudaError_t fill_group_args_cuda(const int32_t* expert_offsets, int64_t E, int64_t N, int64_t K,
                                 const void* act, void* out, void* shapes, const void** act_rows,
                                 void** out_rows, cudaStream_t stream) {
  fill_group_args<<<1, kThreads, 0, stream>>>(
      expert_offsets, int(E), int(N), int(K), static_cast<const uint16_t*>(act),
      static_cast<uint16_t*>(out), static_cast<int32_t*>(shapes), act_rows, out_rows);
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
