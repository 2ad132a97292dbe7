#pragma once
// The order of int4 weight codes that cuda-mma and cuda-wgmma share (one copy of a layer's codes
// serves both): plain constexpr index math, no CUDA. cuda_mma/layout.hpp describes the layout in
// full; what the two kernels must agree on is collected here.
//
// Along K the codes come in chunks of 64 channels and spans of 32. Inside a span, cuda-mma's
// fragment of step jj (0, 1) for lane (g, t) holds channels 8t + 4jj + {0, 1} at mma columns
// 2t + {0, 1} and channels 8t + 4jj + {2, 3} at columns 2t + 8 + {0, 1}, so that a lane reads 8
// consecutive activations. A kernel that takes the codes as a plain [N, K] matrix (cuda-wgmma)
// sees column 16jj + c of a span holding channel span_column_k(16jj + c), and multiplies it with
// its input permuted the same way.
#include <cstdint>

#if defined(__CUDACC__)
#define QMOE_CODE_ORDER_HOST_DEVICE __host__ __device__
#else
#define QMOE_CODE_ORDER_HOST_DEVICE
#endif

namespace qmoe::int4_order {

inline constexpr int kSpan = 32;
inline constexpr int kChunk = 64;

// The channel (relative to its span) behind column q (0..31) of a span.
QMOE_CODE_ORDER_HOST_DEVICE constexpr int span_column_k(int q) {
  const int step = q / 16, col = q % 16;
  return 8 * ((col % 8) / 2) + 4 * step + 2 * (col / 8) + col % 2;
}

// Its inverse: the column of a span that holds channel k (0..31).
QMOE_CODE_ORDER_HOST_DEVICE constexpr int span_k_column(int k) {
  return 16 * ((k % 8) / 4) + 8 * ((k % 4) / 2) + 2 * (k / 8) + k % 2;
}

// Each nibble holds code XOR 8: the two's-complement nibble of code - 8, the signed code
// cuda-wgmma's kernel converts; cuda-mma undoes the flip for free (mma_primitives.cuh).
inline constexpr uint32_t kCodeFlip = 0x88888888u;

// The nibble, inside one expert's codes of `chunks` chunks along K, that holds row n and channel
// k: strip n / 16, chunk k / 64, lane (g, t) = (n % 8, channel's t), its 16 bytes being the
// chunk's four step words, nibble (register, half) of the step word (cuda_mma/layout.hpp).
QMOE_CODE_ORDER_HOST_DEVICE constexpr int64_t code_nibble(int64_t n, int64_t k, int64_t chunks) {
  const int r = int(n % 16), g = r % 8, hi = r / 8;
  const int in_chunk = int(k % kChunk), span = in_chunk / kSpan, kk = in_chunk % kSpan;
  const int t = kk / 8, step = 2 * span + (kk % 8) / 4, pair = (kk % 4) / 2, half = kk % 2;
  const int lane = 4 * g + t, reg = hi + 2 * pair;
  return (((n / 16) * chunks + k / kChunk) * 32 + lane) * 32 + 8 * step + reg + 4 * half;
}

}  // namespace qmoe::int4_order
