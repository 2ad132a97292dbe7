#pragma once
// The kernel's order of 4-bit codes in memory. CUTLASS's mixed-input mainloop loads each
// thread's share of a wgmma A fragment from shared memory; with the codes "shuffled" offline so
// that those eight nibbles are one contiguous 32-bit word, ordered 0,2,4,6,1,3,5,7 (even values in
// the low half), the load is one instruction and each pair converts to bf16/f16 with one
// byte-permute. CUTLASS computes the order as a cute layout (n, k, 1) -> nibble offset; the
// conversion here applies it on the device, one expert at a time.
#include <cute/tensor.hpp>
#include <cutlass/util/mixed_dtype_utils.hpp>

#include <cstdint>

namespace qmoe::cuda_wgmma {

template <class Mma>
constexpr auto shuffle_atom() {
  using ValueOrder =
      cute::Layout<cute::Shape<cute::_2, cute::_4>, cute::Stride<cute::_4, cute::_1>>;
  using AtomsAlongK = cute::Layout<cute::Shape<cute::_1, cute::_1>>;
  return cutlass::compute_memory_reordering_atom<Mma, AtomsAlongK, ValueOrder>();
}

// Pass 1: the nibble of (n, k) goes to byte layout(n, k, 0) of `scratch` (one byte per nibble,
// so no two threads write the same byte).
template <class Layout>
__global__ void scatter_nibbles(const uint8_t* codes, uint8_t* scratch, int64_t N, int64_t K,
                                Layout layout) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= N * K) return;
  const int64_t n = i / K, k = i % K;
  const uint8_t byte = codes[(n * K + k) / 2];
  scratch[layout(int(n), int(k), 0)] = (k % 2 == 0) ? (byte & 0xF) : (byte >> 4);
}

// Pass 2: pack the nibbles back, low nibble = even offset.
static __global__ void pack_nibbles(const uint8_t* scratch, uint8_t* codes, int64_t bytes) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < bytes) codes[i] = uint8_t(scratch[2 * i] | (scratch[2 * i + 1] << 4));
}

// Rewrites one expert's [N, K] K-major nibbles in place into `layout`'s order; `scratch` holds
// N*K bytes.
template <class Layout>
cudaError_t shuffle_nibbles(uint8_t* codes, uint8_t* scratch, int64_t N, int64_t K,
                            const Layout& layout, cudaStream_t stream) {
  const int threads = 256;
  const int64_t nibbles = N * K;
  scatter_nibbles<<<unsigned((nibbles + threads - 1) / threads), threads, 0, stream>>>(
      codes, scratch, N, K, layout);
  pack_nibbles<<<unsigned((nibbles / 2 + threads - 1) / threads), threads, 0, stream>>>(
      scratch, codes, nibbles / 2);
  return cudaGetLastError();
}

}  // namespace qmoe::cuda_wgmma
