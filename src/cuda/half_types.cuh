#pragma once
// bf16/f16 <-> f32 and 16-byte vectors of either, for the element-wise kernels.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

namespace qmoe::cuda {

__device__ __forceinline__ float to_f32(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ __forceinline__ float to_f32(__half x) { return __half2float(x); }

template <class T>
__device__ __forceinline__ T from_f32(float x);
template <>
__device__ __forceinline__ __nv_bfloat16 from_f32<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}
template <>
__device__ __forceinline__ __half from_f32<__half>(float x) {
  return __float2half_rn(x);
}

// N 16-bit values loaded or stored as one access of 2N bytes (N = 8: 16 bytes).
template <class T, int N>
struct alignas(2 * N) Vec {
  T v[N];
};

template <class T, int N>
__device__ __forceinline__ void load_f32(const T* p, float* out) {
  const Vec<T, N> x = *reinterpret_cast<const Vec<T, N>*>(p);
#pragma unroll
  for (int i = 0; i < N; ++i) out[i] = to_f32(x.v[i]);
}

template <class T, int N>
__device__ __forceinline__ void store_f32(T* p, const float* in) {
  Vec<T, N> x;
#pragma unroll
  for (int i = 0; i < N; ++i) x.v[i] = from_f32<T>(in[i]);
  *reinterpret_cast<Vec<T, N>*>(p) = x;
}

// Whether N-element vector accesses are legal for a base pointer and row stride (elements).
template <class T, int N>
inline bool vector_aligned(const void* p, int64_t row_stride) {
  return reinterpret_cast<uintptr_t>(p) % (sizeof(T) * N) == 0 && row_stride % N == 0;
}

}  // namespace qmoe::cuda
