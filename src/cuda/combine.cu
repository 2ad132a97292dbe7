#include <cstdint>

#include "cuda/combine.hpp"
#include "cuda/dependent_launch.cuh"
#include "cuda/half_types.cuh"

namespace qmoe {

namespace {

constexpr int kThreads = 256;

// Block b covers token b / chunks and columns [c*kThreads*N, (c+1)*kThreads*N), N per thread.
// A token's k rows are read kBatch at a time, all their loads issued before any is used: one
// row after another, each behind its own pair_rows load, made a chain of 2k memory latencies
// (6 us for one token at k = 8 on the H200, more than the weighted sum it computes). The sum
// still runs over j = 0 .. k - 1 in order.
template <class T, int N>
__global__ void __launch_bounds__(kThreads)
    combine_kernel(const T* __restrict__ in, int64_t in_stride,
                   const int32_t* __restrict__ pair_rows, const float* __restrict__ weights,
                   int64_t k, int64_t H, T* __restrict__ out, int64_t out_stride, int64_t chunks) {
  constexpr int kBatch = 8;
  cuda::wait_for_prior_grids();
  cuda::release_dependent_grids();
  const int64_t m = blockIdx.x / chunks;
  const int64_t h = ((blockIdx.x % chunks) * kThreads + threadIdx.x) * N;
  if (h >= H) return;
  float sum[N] = {};
  for (int64_t j0 = 0; j0 < k; j0 += kBatch) {
    int64_t row[kBatch];
    float w[kBatch];
#pragma unroll
    for (int b = 0; b < kBatch; ++b) {
      const int64_t pair = m * k + j0 + b;
      // -1: past k, or an expert not on this rank (its row was never computed)
      row[b] = j0 + b >= k ? -1 : pair_rows ? pair_rows[pair] : pair;
      w[b] = j0 + b < k && weights ? weights[pair] : 1.0f;
    }
    float x[kBatch][N];
#pragma unroll
    for (int b = 0; b < kBatch; ++b)
      if (row[b] >= 0) cuda::load_f32<T, N>(in + row[b] * in_stride + h, x[b]);
#pragma unroll
    for (int b = 0; b < kBatch; ++b)
      if (row[b] >= 0)
#pragma unroll
        for (int i = 0; i < N; ++i) sum[i] = fmaf(w[b], x[b][i], sum[i]);
  }
  cuda::store_f32<T, N>(out + m * out_stride + h, sum);
}

template <class T>
cudaError_t launch(const void* in, int64_t in_stride, const int32_t* pair_rows,
                   const float* weights, int64_t M, int64_t k, int64_t H, void* out,
                   int64_t out_stride, cudaStream_t stream) {
  const T* x = static_cast<const T*>(in);
  T* y = static_cast<T*>(out);
  constexpr int kVec = 8;
  const bool vec = H % kVec == 0 && cuda::vector_aligned<T, kVec>(x, in_stride) &&
                   cuda::vector_aligned<T, kVec>(y, out_stride);
  const int n = vec ? kVec : 1;
  const int64_t chunks = (H + int64_t(kThreads) * n - 1) / (int64_t(kThreads) * n);
  const int64_t blocks = M * chunks;
  if (blocks > INT32_MAX) return cudaErrorInvalidValue;
  return cuda::launch_dependent(vec ? combine_kernel<T, kVec> : combine_kernel<T, 1>,
                                static_cast<unsigned>(blocks), kThreads, 0, stream, x, in_stride,
                                pair_rows, weights, k, H, y, out_stride, chunks);
}

}  // namespace

cudaError_t combine_topk_cuda(DType dtype, const void* in, int64_t in_row_stride,
                              const int32_t* pair_rows, const float* topk_weights, int64_t M,
                              int64_t k, int64_t H, void* out, int64_t out_row_stride,
                              cudaStream_t stream) {
  if (M < 0 || k < 1 || H < 0) return cudaErrorInvalidValue;
  if (M == 0 || H == 0) return cudaSuccess;
  if (dtype == DType::bf16)
    return launch<__nv_bfloat16>(in, in_row_stride, pair_rows, topk_weights, M, k, H, out,
                                 out_row_stride, stream);
  if (dtype == DType::f16)
    return launch<__half>(in, in_row_stride, pair_rows, topk_weights, M, k, H, out, out_row_stride,
                          stream);
  return cudaErrorInvalidValue;
}

}  // namespace qmoe
