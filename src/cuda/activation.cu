#include <cstdint>

#include "cuda/activation.hpp"
#include "cuda/activation_math.cuh"
#include "cuda/half_types.cuh"
#include "cuda/int4_code_order.hpp"

namespace qmoe {

namespace {

constexpr int kThreads = 256;

// Block b covers row b / chunks, outputs [c*kThreads*N, (c+1)*kThreads*N) of it, N per thread.
// Gated halves: gate = in[j], up = in[I + j]; swigluoai interleaves them: in[2j], in[2j + 1];
// in strips (ActivationLayout) gate = in[16 (j / 8) + j % 8], up 8 further.
template <class T, Activation A, int N>
__global__ void __launch_bounds__(kThreads)
    activation_kernel(ActivationParams p, ActivationLayout layout, const T* __restrict__ in,
                      int64_t in_stride, T* __restrict__ out, int64_t out_stride, int64_t I,
                      int64_t chunks, const int32_t* __restrict__ rows_limit) {
  const int64_t row = blockIdx.x / chunks;
  if (rows_limit && row >= *rows_limit) return;
  const int64_t j = ((blockIdx.x % chunks) * kThreads + threadIdx.x) * N;
  if (j >= I) return;
  const T* x = in + row * in_stride;
  float result[N];
  if constexpr (gated_kind(A)) {
    float gate[N], up[N];
    if (layout.gate_up_strips) {  // N is 1 or 8, so j .. j + N - 1 lie in one strip
      const T* g = x + 16 * (j / 8) + j % 8;
      cuda::load_f32<T, N>(g, gate);
      cuda::load_f32<T, N>(g + 8, up);
    } else if constexpr (A == Activation::swigluoai) {
      float pairs[2 * N];  // two N-wide loads: the row start is only N-element aligned
      cuda::load_f32<T, N>(x + 2 * j, pairs);
      cuda::load_f32<T, N>(x + 2 * j + N, pairs + N);
#pragma unroll
      for (int i = 0; i < N; ++i) gate[i] = pairs[2 * i], up[i] = pairs[2 * i + 1];
    } else {
      cuda::load_f32<T, N>(x + j, gate);
      cuda::load_f32<T, N>(x + I + j, up);
    }
#pragma unroll
    for (int i = 0; i < N; ++i) result[i] = gated<A>(gate[i], up[i], p);
  } else {
    float v[N];
    cuda::load_f32<T, N>(x + j, v);
#pragma unroll
    for (int i = 0; i < N; ++i) result[i] = single<A>(v[i]);
  }
  T* y = out + row * out_stride;
  if (!layout.span_order_out) {
    cuda::store_f32<T, N>(y + j, result);
    return;
  }
  // Channels k, k + 1 (k even) of a span sit side by side at span_k_column(k).
  const int64_t span = j / int4_order::kSpan * int4_order::kSpan;
  const int k = int(j - span);
  if constexpr (N == 1) {
    y[span + int4_order::span_k_column(k)] = cuda::from_f32<T>(result[0]);
  } else {
#pragma unroll
    for (int i = 0; i < N; i += 2)
      cuda::store_f32<T, 2>(y + span + int4_order::span_k_column(k + i), result + i);
  }
}

template <class T, Activation A>
cudaError_t launch(const ActivationParams& p, ActivationLayout layout, const void* in,
                   int64_t in_stride, void* out, int64_t out_stride, int64_t rows, int64_t I,
                   const int32_t* rows_limit, cudaStream_t stream) {
  const T* x = static_cast<const T*>(in);
  T* y = static_cast<T*>(out);
  // 16-byte accesses when every row start stays aligned; the scalar path covers odd I.
  constexpr int kVec = 8;
  const bool vec = I % kVec == 0 && cuda::vector_aligned<T, kVec>(x, in_stride) &&
                   cuda::vector_aligned<T, kVec>(y, out_stride);
  const int n = vec ? kVec : 1;
  const int64_t chunks = (I + int64_t(kThreads) * n - 1) / (int64_t(kThreads) * n);
  const int64_t blocks = rows * chunks;
  if (blocks > INT32_MAX) return cudaErrorInvalidValue;
  if (vec)
    activation_kernel<T, A, kVec><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(
        p, layout, x, in_stride, y, out_stride, I, chunks, rows_limit);
  else
    activation_kernel<T, A, 1><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(
        p, layout, x, in_stride, y, out_stride, I, chunks, rows_limit);
  return cudaGetLastError();
}

template <class T>
cudaError_t dispatch(Activation a, const ActivationParams& p, ActivationLayout layout,
                     const void* in, int64_t in_stride, void* out, int64_t out_stride, int64_t rows,
                     int64_t I, const int32_t* rows_limit, cudaStream_t stream) {
  switch (a) {
#define QMOE_ACTIVATION_CASE(name)                                                         \
  case Activation::name:                                                                   \
    return launch<T, Activation::name>(p, layout, in, in_stride, out, out_stride, rows, I, \
                                       rows_limit, stream);
    QMOE_EACH_ACTIVATION(QMOE_ACTIVATION_CASE)
#undef QMOE_ACTIVATION_CASE
  }
  return cudaErrorInvalidValue;
}

}  // namespace

cudaError_t activation_cuda(Activation activation, const ActivationParams& params, DType dtype,
                            const void* in, int64_t in_row_stride, void* out,
                            int64_t out_row_stride, int64_t rows, int64_t I,
                            const int32_t* rows_limit_dev, cudaStream_t stream,
                            ActivationLayout layout) {
  if (rows < 0 || I < 0) return cudaErrorInvalidValue;
  if ((layout.gate_up_strips && I % 8 != 0) ||
      (layout.span_order_out && I % int4_order::kSpan != 0))
    return cudaErrorInvalidValue;
  if (rows == 0 || I == 0) return cudaSuccess;
  if (dtype == DType::bf16)
    return dispatch<__nv_bfloat16>(activation, params, layout, in, in_row_stride, out,
                                   out_row_stride, rows, I, rows_limit_dev, stream);
  if (dtype == DType::f16)
    return dispatch<__half>(activation, params, layout, in, in_row_stride, out, out_row_stride,
                            rows, I, rows_limit_dev, stream);
  return cudaErrorInvalidValue;
}

}  // namespace qmoe
