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

// A candidate in an arg-max: higher value wins, equal values go to the lower index (the CPU
// reference's tie rule). `payload` rides along (the unbiased score of a routing candidate).
struct Candidate {
  float value;
  int index;
  float payload;
};

__device__ __forceinline__ bool beats(const Candidate& a, const Candidate& b) {
  return a.value > b.value || (a.value == b.value && a.index < b.index);
}

// Every lane gets the warp's best candidate. Lanes with nothing to offer pass index INT32_MAX.
__device__ __forceinline__ Candidate warp_argmax(Candidate c) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) {
    Candidate other{__shfl_xor_sync(kFullWarp, c.value, offset),
                    __shfl_xor_sync(kFullWarp, c.index, offset),
                    __shfl_xor_sync(kFullWarp, c.payload, offset)};
    if (beats(other, c)) c = other;
  }
  return c;
}

}  // namespace qmoe::cuda
