#include <cuda_bf16.h>

#include <cmath>

#include "measure/gpu/bench_kernels.hpp"

namespace qmoe::bench {

namespace {

__device__ __forceinline__ uint64_t splitmix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Box-Muller on two 32-bit halves of one hash.
__device__ __forceinline__ float normal_at(uint64_t seed, int64_t i) {
  const uint64_t h = splitmix(seed * 0x2545f4914f6cdd1dull + static_cast<uint64_t>(i));
  const float u1 = (static_cast<uint32_t>(h >> 32) + 1.0f) * 2.3283064e-10f;  // (0, 1]
  const float u2 = static_cast<uint32_t>(h) * 2.3283064e-10f;
  return sqrtf(-2.0f * logf(u1)) * cospif(2.0f * u2);
}

unsigned blocks_for(int64_t n, int threads) {
  const int64_t b = (n + threads - 1) / threads;
  return static_cast<unsigned>(b < 65535 * 16 ? b : 65535 * 16);
}

__global__ void fill_bf16_kernel(__nv_bfloat16* x, int64_t n, uint64_t seed, float stddev) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    x[i] = __float2bfloat16_rn(stddev * normal_at(seed, i));
}

__global__ void fill_f32_kernel(float* x, int64_t n, uint64_t seed, float stddev) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    x[i] = stddev * normal_at(seed, i);
}

__global__ void fill_weight_kernel(uint8_t* codes, int64_t code_bytes, float* scales,
                                   uint8_t* zeros, int64_t groups, int bits, bool mxfp4,
                                   uint64_t seed, float base) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < code_bytes; i += stride)
    codes[i] = static_cast<uint8_t>(splitmix(seed ^ static_cast<uint64_t>(i)));
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < groups; i += stride) {
    const uint64_t h = splitmix(~seed ^ static_cast<uint64_t>(i));
    scales[i] = mxfp4 ? ldexpf(base, int(h % 3) - 1)
                      : base * (0.75f + 0.5f * static_cast<uint32_t>(h) * 2.3283064e-10f);
    if (zeros) zeros[i] = static_cast<uint8_t>((h >> 32) & ((1u << bits) - 1));
  }
}

// e2m1: bit 3 sign, bits 2..1 exponent (bias 1), bit 0 mantissa; exponent 0 is subnormal.
__device__ __forceinline__ float e2m1_value(int code) {
  const int e = (code >> 1) & 3, m = code & 1;
  const float magnitude = e == 0 ? 0.5f * float(m) : ldexpf(1.0f + 0.5f * float(m), e - 1);
  return code & 8 ? -magnitude : magnitude;
}

// Element (row, k) of a weight, dequantized exactly in fp32.
__device__ __forceinline__ float weight_at(const WeightView& w, int64_t row, int64_t k) {
  const int64_t g = row * (w.K / w.G) + k / w.G;
  const int code = w.bits == 4 ? (w.codes[row * (w.K / 2) + k / 2] >> (4 * (k & 1))) & 15
                               : w.codes[row * w.K + k];
  if (w.mxfp4) return e2m1_value(code) * w.scales[g];
  const int zero = w.zeros ? w.zeros[g] : 1 << (w.bits - 1);
  return float(code - zero) * w.scales[g];
}

__global__ void dequantize_kernel(WeightView w, int64_t rows, __nv_bfloat16* out) {
  const int64_t n = rows * w.K;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    out[i] = __float2bfloat16_rn(weight_at(w, i / w.K, i % w.K));
}

// One warp per output feature n of pair p; lanes stride over the inputs of the row.
__global__ void reference_matvec_kernel(WeightView w, const int32_t* pair_expert, const float* in,
                                        float* out) {
  const int lane = threadIdx.x % 32;
  const int64_t n = blockIdx.x * int64_t(blockDim.x / 32) + threadIdx.x / 32;
  const int64_t p = blockIdx.y;
  if (n >= w.N) return;
  const int64_t row = int64_t(pair_expert[p]) * w.N + n;
  const float* x = in + p * w.K;
  float acc = 0.0f;
  for (int64_t k = lane; k < w.K; k += 32) acc += weight_at(w, row, k) * x[k];
  for (int offset = 16; offset > 0; offset >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, offset);
  if (lane == 0) out[p * w.N + n] = acc;
}

__global__ void silu_mul_kernel(const float* h, int64_t pairs, int64_t I, float* out) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < pairs * I;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t p = i / I, j = i % I;
    const float g = h[p * 2 * I + j];
    out[i] = g / (1.0f + expf(-g)) * h[p * 2 * I + I + j];
  }
}

// One block per gathered row, 16-byte copies (H % 8 == 0 for every benchmark shape).
__global__ void gather_kernel(const uint4* x, const int32_t* sorted_pair_ids, int64_t k,
                              int64_t vecs_per_row, uint4* rows) {
  const int64_t r = blockIdx.x;
  const int64_t token = sorted_pair_ids[r] / k;
  for (int64_t v = threadIdx.x; v < vecs_per_row; v += blockDim.x)
    rows[r * vecs_per_row + v] = x[token * vecs_per_row + v];
}

// Four independent 16-byte loads per thread before any store, so enough bytes are in flight to
// reach the memory's bandwidth.
template <bool kStreaming>
__global__ void copy_kernel(const uint4* __restrict__ src, uint4* __restrict__ dst, int64_t n) {
  constexpr int kUnroll = 4;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t base = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; base < n;
       base += stride * kUnroll) {
    uint4 v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
      if (base + u * stride < n)
        v[u] = kStreaming ? __ldcs(src + base + u * stride) : src[base + u * stride];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
      if (base + u * stride < n) {
        if constexpr (kStreaming)
          __stcs(dst + base + u * stride, v[u]);
        else
          dst[base + u * stride] = v[u];
      }
  }
}

}  // namespace

cudaError_t fill_normal_bf16(uint16_t* x, int64_t n, uint64_t seed, float stddev,
                             cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  fill_bf16_kernel<<<blocks_for(n, 256), 256, 0, stream>>>(reinterpret_cast<__nv_bfloat16*>(x), n,
                                                           seed, stddev);
  return cudaGetLastError();
}

cudaError_t fill_normal_f32(float* x, int64_t n, uint64_t seed, float stddev, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  fill_f32_kernel<<<blocks_for(n, 256), 256, 0, stream>>>(x, n, seed, stddev);
  return cudaGetLastError();
}

cudaError_t fill_weight(uint8_t* codes, float* scales, uint8_t* zeros, int64_t E, int64_t N,
                        int64_t K, int bits, int G, bool mxfp4, uint64_t seed,
                        cudaStream_t stream) {
  const int64_t code_bytes = E * N * K * bits / 8;
  // (q - zero) spreads 2^(bits - 4) times wider at more bits: keep the outputs O(1).
  const float base =
      mxfp4
          ? std::exp2(std::round(-std::log2(3.0f * std::sqrt(static_cast<float>(K)))))
          : 1.0f / (4.6f * std::sqrt(static_cast<float>(K)) * static_cast<float>(1 << (bits - 4)));
  fill_weight_kernel<<<blocks_for(code_bytes, 256), 256, 0, stream>>>(
      codes, code_bytes, scales, zeros, E * N * (K / G), bits, mxfp4, seed, base);
  return cudaGetLastError();
}

cudaError_t dequantize_bf16(const WeightView& w, int64_t E, uint16_t* out, cudaStream_t stream) {
  dequantize_kernel<<<blocks_for(E * w.N * w.K, 256), 256, 0, stream>>>(
      w, E * w.N, reinterpret_cast<__nv_bfloat16*>(out));
  return cudaGetLastError();
}

cudaError_t reference_expert_matvec(const WeightView& w, const int32_t* pair_expert,
                                    const float* in, int64_t pairs, float* out,
                                    cudaStream_t stream) {
  if (pairs == 0) return cudaSuccess;
  const dim3 grid(static_cast<unsigned>((w.N + 7) / 8), static_cast<unsigned>(pairs));
  reference_matvec_kernel<<<grid, 256, 0, stream>>>(w, pair_expert, in, out);
  return cudaGetLastError();
}

cudaError_t reference_silu_mul(const float* h, int64_t pairs, int64_t I, float* out,
                               cudaStream_t stream) {
  if (pairs == 0) return cudaSuccess;
  silu_mul_kernel<<<blocks_for(pairs * I, 256), 256, 0, stream>>>(h, pairs, I, out);
  return cudaGetLastError();
}

cudaError_t gather_rows_bf16(const uint16_t* x, const int32_t* sorted_pair_ids, int64_t num_rows,
                             int64_t k, int64_t H, uint16_t* rows, cudaStream_t stream) {
  if (num_rows == 0) return cudaSuccess;
  gather_kernel<<<static_cast<unsigned>(num_rows), 128, 0, stream>>>(
      reinterpret_cast<const uint4*>(x), sorted_pair_ids, k, H / 8, reinterpret_cast<uint4*>(rows));
  return cudaGetLastError();
}

cudaError_t sm_copy(const void* src, void* dst, int64_t bytes, int blocks_per_sm, bool streaming,
                    cudaStream_t stream) {
  int device = 0, sms = 0;
  if (const cudaError_t err = cudaGetDevice(&device); err != cudaSuccess) return err;
  if (const cudaError_t err = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
      err != cudaSuccess)
    return err;
  const auto blocks = static_cast<unsigned>(sms * blocks_per_sm);
  const auto* s = static_cast<const uint4*>(src);
  auto* d = static_cast<uint4*>(dst);
  if (streaming)
    copy_kernel<true><<<blocks, 512, 0, stream>>>(s, d, bytes / 16);
  else
    copy_kernel<false><<<blocks, 512, 0, stream>>>(s, d, bytes / 16);
  return cudaGetLastError();
}

}  // namespace qmoe::bench
