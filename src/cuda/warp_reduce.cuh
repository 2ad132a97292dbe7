#pragma once
// Warp-wide reductions shared by the routing kernels (all 32 lanes participate).
#include <cstdint>

namespace qmoe::cuda {

inline constexpr unsigned kFullWarp = 0xffffffffu;

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1)
    v = fmaxf(v, __shfl_xor_sync(kFullWarp, v, offset));
  return v;
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(kFullWarp, v, offset);
  return v;
}

// Order-preserving map of a float onto an unsigned key: a greater float has a greater key, equal
// floats (-0 and +0 included) equal keys. Every float, -inf included, maps above 0, so key 0 can
// mean "nothing to offer".
__device__ __forceinline__ unsigned order_key(float v) {
  const unsigned u = __float_as_uint(v == 0.0f ? 0.0f : v);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

// The warp's arg-max under the CPU reference's rule: the highest key wins and among equal keys the
// lowest index. Each lane offers one (key, index); every lane gets the winning index. Two warp
// reductions (sm_80+) instead of a five-level shuffle tree over (value, index) pairs.
__device__ __forceinline__ unsigned warp_argmax_index(unsigned key, unsigned index) {
  const unsigned best = __reduce_max_sync(kFullWarp, key);
  return __reduce_min_sync(kFullWarp, key == best ? index : 0xffffffffu);
}

}  // namespace qmoe::cuda
