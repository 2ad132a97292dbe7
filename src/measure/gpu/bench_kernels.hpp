#pragma once
// Device helpers of the GPU MoE benchmark only: random data, dequantization for the cuBLAS
// baseline, the fp32 reference forward on a few tokens, the row gather of the baseline.
#include <cuda_runtime_api.h>

#include <cstdint>

namespace qmoe::bench {

// x[i] ~ N(mean, stddev) from a counter-based hash of (seed, i): the same seed gives the same
// data on any launch shape. bf16 or f32 output.
cudaError_t fill_normal_bf16(uint16_t* x, int64_t n, uint64_t seed, float stddev,
                             cudaStream_t stream);
cudaError_t fill_normal_f32(float* x, int64_t n, uint64_t seed, float stddev, cudaStream_t stream);

// A benchmark weight on the device, [E, N, K] of `bits`-bit codes: codes u8 [E, N, K * bits / 8]
// (4-bit: low nibble = even k), scales f32 [E, N, K / G], zeros u8 [E, N, K / G] or nullptr
// (zero 2^(bits - 1)); value = (code - zero) * scale, or with mxfp4 e2m1(code) * scale (scales
// powers of two, G 32). N and K are per expert.
struct WeightView {
  const uint8_t* codes = nullptr;
  const float* scales = nullptr;
  const uint8_t* zeros = nullptr;
  int64_t N = 0, K = 0;
  int bits = 4, G = 128;
  bool mxfp4 = false;
};

// Random weights: uniform codes, scales base * U(0.75, 1.25) with base = 1 / (4.6 sqrt(K)
// 2^(bits - 4)) so that outputs are O(1), zeros (when asked for) uniform over the code range.
// mxfp4: scales are base, base / 2 or 2 base with base the power of two nearest 1 / (3 sqrt(K))
// (e2m1 codes have an rms near 3).
cudaError_t fill_weight(uint8_t* codes, float* scales, uint8_t* zeros, int64_t E, int64_t N,
                        int64_t K, int bits, int G, bool mxfp4, uint64_t seed, cudaStream_t stream);

// bf16 [E, N, K], for the cuBLAS baseline.
cudaError_t dequantize_bf16(const WeightView& w, int64_t E, uint16_t* out, cudaStream_t stream);

// fp32 reference of one expert GEMM per pair p: out[p, n] = sum_k W[expert[p], n, k] in[p, k],
// W dequantized exactly in fp32.
cudaError_t reference_expert_matvec(const WeightView& w, const int32_t* pair_expert,
                                    const float* in, int64_t pairs, float* out,
                                    cudaStream_t stream);

// silu(h[p, i]) * h[p, I + i] in fp32: [pairs, 2I] -> [pairs, I].
cudaError_t reference_silu_mul(const float* h, int64_t pairs, int64_t I, float* out,
                               cudaStream_t stream);

// rows[r, :] = x[sorted_pair_ids[r] / k, :] for r < num_rows (bf16, H columns, contiguous).
cudaError_t gather_rows_bf16(const uint16_t* x, const int32_t* sorted_pair_ids, int64_t num_rows,
                             int64_t k, int64_t H, uint16_t* rows, cudaStream_t stream);

// The copy ceiling: dst = src with 16-byte loads and stores on the SMs (bytes % 16 == 0),
// blocks_per_sm blocks of 512 threads per multiprocessor; `streaming` marks loads and stores as
// touched once (evict-first), which can keep the L2 from holding lines nobody reads again.
cudaError_t sm_copy(const void* src, void* dst, int64_t bytes, int blocks_per_sm, bool streaming,
                    cudaStream_t stream);

}  // namespace qmoe::bench
