#include <cub/block/block_scan.cuh>

#include "backend/cuda_common/batched_rows.hpp"
#include "cuda/align_tiling.hpp"
#include "cuda/dependent_launch.cuh"
#include "cuda/routing_fault.cuh"

namespace qmoe::cuda_common {

namespace {

constexpr int kAlignThreads = kMaxAlignExperts;  // one thread per expert
constexpr int kScatterThreads = 128;

__device__ __forceinline__ int clamped_count(const int32_t* counts, int e, int64_t T_max) {
  const int c = counts[e];
  return c < 0 ? 0 : c > T_max ? static_cast<int>(T_max) : c;
}

__global__ void __launch_bounds__(kAlignThreads)
    align_batched_kernel(const int32_t* __restrict__ counts, int E, int64_t T_max, int tile_rows,
                         int64_t max_padded_rows, int64_t max_tiles, AlignOutputs out) {
  cuda::wait_for_prior_grids();
  cuda::release_dependent_grids();
  using Scan = cub::BlockScan<int, kAlignThreads>;
  __shared__ typename Scan::TempStorage scan_sh;
  __shared__ int begin_sh[kMaxAlignExperts], count_sh[kMaxAlignExperts];
  const int e = threadIdx.x;
  int count = 0;
  if (e < E) {
    count = clamped_count(counts, e, T_max);
    if (count != counts[e])
      cuda::report_routing_fault(out.fault, RoutingFault::batched_count, e,
                                 static_cast<uint32_t>(counts[e]));
  }
  int begin = 0, total = 0;
  Scan(scan_sh).ExclusiveSum((count + tile_rows - 1) / tile_rows * tile_rows, begin, total);
  if (e < E) {
    begin_sh[e] = begin;
    count_sh[e] = count;
    out.expert_offsets[e] = begin;
  }
  if (e == 0) {
    out.expert_offsets[E] = total;
    *out.padded_total = total;
  }
  __syncthreads();
  const auto sentinel = static_cast<int32_t>(E * T_max);
  // Expert by expert, every thread on its rows: a count may be far above the block's threads.
#pragma unroll 1
  for (int x = 0; x < E; ++x) {
    const int first = begin_sh[x], c = count_sh[x];
    const int padded = (c + tile_rows - 1) / tile_rows * tile_rows;
    for (int r = threadIdx.x; r < padded; r += kAlignThreads)
      out.sorted_pair_ids[first + r] = r < c ? static_cast<int32_t>(x * T_max + r) : sentinel;
    for (int t = threadIdx.x; t < padded / tile_rows; t += kAlignThreads)
      out.tile_experts[first / tile_rows + t] = x;
  }
  for (int64_t t = total / tile_rows + threadIdx.x; t < max_tiles; t += kAlignThreads)
    out.tile_experts[t] = -1;
  for (int64_t r = total + threadIdx.x; r < max_padded_rows; r += kAlignThreads)
    out.sorted_pair_ids[r] = sentinel;
}

// Block (t, e) copies row t of expert e when t < its count; V: uint4 (16-byte rows) or uint16_t.
template <class V>
__global__ void __launch_bounds__(kScatterThreads)
    scatter_kernel(const V* __restrict__ in, const int32_t* __restrict__ counts,
                   const int32_t* __restrict__ expert_offsets, int64_t T_max, int64_t row_values,
                   V* __restrict__ out) {
  cuda::wait_for_prior_grids();
  cuda::release_dependent_grids();
  const int e = blockIdx.y;
  const int64_t t = blockIdx.x;
  if (t >= clamped_count(counts, e, T_max)) return;
  const V* src = in + (expert_offsets[e] + t) * row_values;
  V* dst = out + (e * T_max + t) * row_values;
  for (int64_t i = threadIdx.x; i < row_values; i += kScatterThreads) dst[i] = src[i];
}

bool aligned_16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

}  // namespace

cudaError_t align_batched_cuda(const int32_t* counts, int64_t E, int64_t T_max, int tile_rows,
                               const AlignOutputs& out, cudaStream_t stream) {
  if (E < 1 || E > kMaxAlignExperts || T_max < 1 || tile_rows < 1 ||
      E * T_max >= align_tiling::kMaxPairs || !out.sorted_pair_ids || !out.tile_experts ||
      !out.expert_offsets || !out.padded_total)
    return cudaErrorInvalidValue;
  const AlignSizes sizes = align_sizes(E * T_max, E, tile_rows);
  return cuda::launch_dependent(align_batched_kernel, 1, kAlignThreads, 0, stream, counts,
                                static_cast<int>(E), T_max, tile_rows, sizes.max_padded_rows,
                                sizes.max_tiles, out);
}

cudaError_t scatter_batched_rows_cuda(const void* in, const int32_t* counts,
                                      const int32_t* expert_offsets, int64_t E, int64_t T_max,
                                      int64_t H, void* out, cudaStream_t stream) {
  if (E < 1 || E > 65535 || T_max < 1 || T_max > INT32_MAX || H < 1) return cudaErrorInvalidValue;
  const dim3 grid(static_cast<unsigned>(T_max), static_cast<unsigned>(E));
  if (H % 8 == 0 && aligned_16(in) && aligned_16(out))
    return cuda::launch_dependent(scatter_kernel<uint4>, grid, kScatterThreads, 0, stream,
                                  static_cast<const uint4*>(in), counts, expert_offsets, T_max,
                                  H / 8, static_cast<uint4*>(out));
  return cuda::launch_dependent(scatter_kernel<uint16_t>, grid, kScatterThreads, 0, stream,
                                static_cast<const uint16_t*>(in), counts, expert_offsets, T_max, H,
                                static_cast<uint16_t*>(out));
}

}  // namespace qmoe::cuda_common
