#include <algorithm>
#include <cstdint>

#include "cuda/align.hpp"
#include "cuda/align_tiling.hpp"

namespace qmoe {

namespace {

using align_tiling::kPairsPerBlock;
using align_tiling::kPairsPerWarp;
using align_tiling::kThreads;
using align_tiling::kWarps;
static_assert(kThreads >= kMaxAlignExperts, "the scan gives every local expert one thread");

__device__ __forceinline__ int local_expert(const int32_t* topk_ids, int64_t i, int num_experts,
                                            const int32_t* expert_map, int num_local) {
  const int e = topk_ids[i];
  if (e < 0 || e >= num_experts) return -1;
  const int local = expert_map ? expert_map[e] : e;
  return local < num_local ? local : -1;
}

// Per-block histogram of local experts -> block_counts[block][E_local].
__global__ void __launch_bounds__(kThreads)
    count_kernel(const int32_t* __restrict__ topk_ids, int64_t num_pairs, int num_experts,
                 const int32_t* __restrict__ expert_map, int num_local,
                 int32_t* __restrict__ block_counts) {
  __shared__ int counts_sh[kMaxAlignExperts];
  for (int e = threadIdx.x; e < num_local; e += kThreads) counts_sh[e] = 0;
  __syncthreads();
  const int64_t begin = int64_t(blockIdx.x) * kPairsPerBlock;
  const int64_t end = min(begin + kPairsPerBlock, num_pairs);
  for (int64_t i = begin + threadIdx.x; i < end; i += kThreads) {
    const int e = local_expert(topk_ids, i, num_experts, expert_map, num_local);
    if (e >= 0) atomicAdd(&counts_sh[e], 1);
  }
  __syncthreads();
  for (int e = threadIdx.x; e < num_local; e += kThreads)
    block_counts[int64_t(blockIdx.x) * num_local + e] = counts_sh[e];
}

// Inclusive block-wide scan of one int per thread (Hillis-Steele; E_local <= 512 values).
__device__ int block_inclusive_scan(int v, int* scan_sh) {
  scan_sh[threadIdx.x] = v;
  __syncthreads();
  for (int offset = 1; offset < kThreads; offset <<= 1) {
    const int add = threadIdx.x >= offset ? scan_sh[threadIdx.x - offset] : 0;
    __syncthreads();
    scan_sh[threadIdx.x] += add;
    __syncthreads();
  }
  const int result = scan_sh[threadIdx.x];
  __syncthreads();
  return result;
}

// One block. Turns block_counts into each block's first rank per expert, lays out the padded
// expert runs and writes everything that does not depend on individual pairs.
__global__ void __launch_bounds__(kThreads)
    layout_kernel(int32_t* __restrict__ block_counts, int num_blocks, int num_local, int tile_rows,
                  int32_t sentinel, int64_t max_padded_rows, int64_t max_tiles, AlignOutputs out) {
  __shared__ int scan_sh[kThreads];
  const int e = threadIdx.x;
  int count = 0;
  if (e < num_local) {
    for (int b = 0; b < num_blocks; ++b) {
      int32_t* slot = block_counts + int64_t(b) * num_local + e;
      const int c = *slot;
      *slot = count;
      count += c;
    }
  }
  const int padded = (count + tile_rows - 1) / tile_rows * tile_rows;
  const int end = block_inclusive_scan(padded, scan_sh);
  const int begin = end - padded;
  const int active_rank = block_inclusive_scan(count > 0 ? 1 : 0, scan_sh) - (count > 0 ? 1 : 0);
  __shared__ int total_sh, active_sh;
  if (e == num_local - 1) {
    total_sh = end;
    active_sh = active_rank + (count > 0 ? 1 : 0);
  }
  __syncthreads();
  const int padded_total = total_sh;

  if (e < num_local) {
    out.expert_offsets[e] = begin;
    if (out.expert_counts) out.expert_counts[e] = count;
    for (int t = begin / tile_rows; t < end / tile_rows; ++t) out.tile_experts[t] = e;
    for (int r = begin + count; r < end; ++r) out.sorted_pair_ids[r] = sentinel;
    if (out.active_experts) {
      if (count > 0) out.active_experts[active_rank] = e;
      if (e >= active_sh) out.active_experts[e] = -1;
    }
  }
  if (e == 0) {
    out.expert_offsets[num_local] = padded_total;
    *out.padded_total = padded_total;
    if (out.num_active) *out.num_active = active_sh;
  }
  for (int64_t t = padded_total / tile_rows + e; t < max_tiles; t += kThreads)
    out.tile_experts[t] = -1;
  for (int64_t r = padded_total + e; r < max_padded_rows; r += kThreads)
    out.sorted_pair_ids[r] = sentinel;
}

// Places every pair at offset[e] + its rank within expert e (see kPairsPerBlock).
__global__ void __launch_bounds__(kThreads)
    scatter_kernel(const int32_t* __restrict__ topk_ids, int64_t num_pairs, int num_experts,
                   const int32_t* __restrict__ expert_map, int num_local,
                   const int32_t* __restrict__ block_first_rank, AlignOutputs out) {
  __shared__ int next_sh[kWarps][kMaxAlignExperts];  // per warp: next row of each expert
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  for (int e = threadIdx.x; e < num_local; e += kThreads)
    for (int w = 0; w < kWarps; ++w) next_sh[w][e] = 0;
  __syncthreads();

  const int64_t warp_begin = int64_t(blockIdx.x) * kPairsPerBlock + warp * kPairsPerWarp;
  const unsigned lanes_below = (1u << lane) - 1u;
  for (int step = 0; step < kPairsPerWarp; step += 32) {
    const int64_t i = warp_begin + step + lane;
    const int e =
        i < num_pairs ? local_expert(topk_ids, i, num_experts, expert_map, num_local) : -1;
    const unsigned same = __match_any_sync(0xffffffffu, e);
    if (e >= 0 && (same & lanes_below) == 0) next_sh[warp][e] += __popc(same);
  }
  __syncthreads();
  for (int e = threadIdx.x; e < num_local; e += kThreads) {
    int row = out.expert_offsets[e] + block_first_rank[int64_t(blockIdx.x) * num_local + e];
    for (int w = 0; w < kWarps; ++w) {
      const int c = next_sh[w][e];
      next_sh[w][e] = row;
      row += c;
    }
  }
  __syncthreads();

  for (int step = 0; step < kPairsPerWarp; step += 32) {
    const int64_t i = warp_begin + step + lane;
    const bool in_range = i < num_pairs;
    const int e = in_range ? local_expert(topk_ids, i, num_experts, expert_map, num_local) : -1;
    const unsigned same = __match_any_sync(0xffffffffu, e);
    int row = -1;
    if (e >= 0) row = next_sh[warp][e] + __popc(same & lanes_below);
    __syncwarp();
    if (e >= 0 && (same & lanes_below) == 0) next_sh[warp][e] += __popc(same);
    __syncwarp();
    if (e >= 0) out.sorted_pair_ids[row] = static_cast<int32_t>(i);
    if (in_range && out.pair_rows) out.pair_rows[i] = row;
  }
}

}  // namespace

cudaError_t align_by_expert_cuda(const int32_t* topk_ids, int64_t num_pairs, int64_t num_experts,
                                 const int32_t* expert_map, int64_t num_local_experts,
                                 int tile_rows, void* workspace, size_t workspace_bytes,
                                 const AlignOutputs& out, cudaStream_t stream) {
  if (num_local_experts < 1 || num_local_experts > kMaxAlignExperts || tile_rows < 1 ||
      num_pairs < 0 || num_pairs >= align_tiling::kMaxPairs || num_experts < 1 ||
      num_experts > INT32_MAX || (!expert_map && num_local_experts != num_experts))
    return cudaErrorInvalidValue;
  if (!out.sorted_pair_ids || !out.tile_experts || !out.expert_offsets || !out.padded_total ||
      (!out.active_experts != !out.num_active))
    return cudaErrorInvalidValue;
  const int blocks = static_cast<int>(align_tiling::blocks_for(num_pairs));
  const int num_local = static_cast<int>(num_local_experts);
  const int ids_range = static_cast<int>(num_experts);
  if (workspace_bytes < align_tiling::workspace_bytes(num_pairs, num_local))
    return cudaErrorInvalidValue;
  auto* block_counts = static_cast<int32_t*>(workspace);
  const int64_t max_padded_rows = align_tiling::max_padded_rows(num_pairs, num_local, tile_rows);

  if (blocks > 0) {
    count_kernel<<<blocks, kThreads, 0, stream>>>(topk_ids, num_pairs, ids_range, expert_map,
                                                  num_local, block_counts);
    if (const cudaError_t err = cudaGetLastError(); err != cudaSuccess) return err;
  }
  layout_kernel<<<1, kThreads, 0, stream>>>(block_counts, blocks, num_local, tile_rows,
                                            static_cast<int32_t>(num_pairs), max_padded_rows,
                                            max_padded_rows / tile_rows, out);
  if (const cudaError_t err = cudaGetLastError(); err != cudaSuccess) return err;
  if (blocks > 0) {
    scatter_kernel<<<blocks, kThreads, 0, stream>>>(topk_ids, num_pairs, ids_range, expert_map,
                                                    num_local, block_counts, out);
    return cudaGetLastError();
  }
  return cudaSuccess;
}

}  // namespace qmoe
