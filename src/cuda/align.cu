#include <algorithm>
#include <cstdint>

#include "cuda/align.hpp"
#include "cuda/align_tiling.hpp"
#include "cuda/align_warp.cuh"
#include "cuda/dependent_launch.cuh"

namespace qmoe {

namespace {

using align_tiling::kPairsPerBlock;
using align_tiling::kPairsPerWarp;
using align_tiling::kThreads;
using align_tiling::kWarps;
using cuda::kWarpAlignPairs;
using cuda::local_expert;
static_assert(kThreads >= kMaxAlignExperts, "the scan gives every local expert one thread");

constexpr int kSteps = kPairsPerWarp / 32;  // pairs per lane

// The local expert of each pair of this lane in its warp's run (-1: dropped or past the end),
// all loaded before any is used so the loads overlap.
__device__ __forceinline__ void load_warp_run(const int32_t* topk_ids, int64_t num_pairs,
                                              int num_experts, const int32_t* expert_map,
                                              int num_local, unsigned long long* fault,
                                              int (&e)[kSteps]) {
  const int64_t first =
      int64_t(blockIdx.x) * kPairsPerBlock + (threadIdx.x / 32) * kPairsPerWarp + threadIdx.x % 32;
#pragma unroll
  for (int s = 0; s < kSteps; ++s) {
    const int64_t i = first + s * 32;
    e[s] =
        i < num_pairs ? local_expert(topk_ids, i, num_experts, expert_map, num_local, fault) : -1;
  }
}

// How far this block's pairs reach: the steps of this warp's run and the warps of the block that
// hold any pair. Loops stop there: at decode (a few pairs) only the first step of the first warp
// has work, and walking all 8 steps of all 16 warps cost 0.5-0.9 us of the kernel's 3-5
// (bench/NOTES.md, session 10 run 5).
__device__ __forceinline__ int clamp_to(int64_t v, int hi) {
  return v < 0 ? 0 : v > hi ? hi : static_cast<int>(v);
}
__device__ __forceinline__ int steps_with_pairs(int64_t num_pairs) {
  const int64_t first = int64_t(blockIdx.x) * kPairsPerBlock + (threadIdx.x / 32) * kPairsPerWarp;
  return clamp_to((num_pairs - first + 31) / 32, kSteps);
}
__device__ __forceinline__ int warps_with_pairs(int64_t num_pairs) {
  const int64_t first = int64_t(blockIdx.x) * kPairsPerBlock;
  return clamp_to((num_pairs - first + kPairsPerWarp - 1) / kPairsPerWarp, kWarps);
}

// table_sh[w][e] = pairs of local expert e in warp w's run (w < warps_with_pairs). The lowest lane
// of each group of equal experts in a step adds the group's size, so no atomics are needed. Caller
// syncs after.
__device__ void count_per_warp(const int (&e)[kSteps], int64_t num_pairs, int num_local,
                               int (*table_sh)[kMaxAlignExperts]) {
  for (int idx = threadIdx.x; idx < warps_with_pairs(num_pairs) * num_local; idx += kThreads)
    table_sh[idx / num_local][idx % num_local] = 0;  // only these rows are ever read
  __syncthreads();
  const int warp = threadIdx.x / 32, steps = steps_with_pairs(num_pairs);
  const unsigned lanes_below = (1u << (threadIdx.x % 32)) - 1u;
#pragma unroll
  for (int s = 0; s < kSteps; ++s) {
    if (s == steps) break;  // uniform per warp
    const unsigned same = __match_any_sync(0xffffffffu, e[s]);
    if (e[s] >= 0 && (same & lanes_below) == 0) table_sh[warp][e[s]] += __popc(same);
    __syncwarp();  // the next step's leader of the same expert may be another lane
  }
}

// Turns the counts of expert `e` (this thread's) into each warp's first row: first_row plus the
// pairs of that expert in earlier warps (of the `warps` that hold pairs). Caller syncs before and
// after.
__device__ void warp_first_rows(int e, int first_row, int warps,
                                int (*table_sh)[kMaxAlignExperts]) {
  int row = first_row;
  for (int w = 0; w < warps; ++w) {
    const int c = table_sh[w][e];
    table_sh[w][e] = row;
    row += c;
  }
}

// Places each pair at its warp's next row of its expert, in increasing pair order.
__device__ void place_pairs(const int (&e)[kSteps], int64_t num_pairs,
                            int (*table_sh)[kMaxAlignExperts], const AlignOutputs& out) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const unsigned lanes_below = (1u << lane) - 1u;
  const int64_t first = int64_t(blockIdx.x) * kPairsPerBlock + warp * kPairsPerWarp + lane;
  const int steps = steps_with_pairs(num_pairs);
#pragma unroll
  for (int s = 0; s < kSteps; ++s) {
    if (s == steps) break;  // uniform per warp; no pair of this lane lies further
    const int64_t i = first + s * 32;
    const unsigned same = __match_any_sync(0xffffffffu, e[s]);
    int row = -1;
    if (e[s] >= 0) row = table_sh[warp][e[s]] + __popc(same & lanes_below);
    __syncwarp();
    if (e[s] >= 0 && (same & lanes_below) == 0) table_sh[warp][e[s]] += __popc(same);
    __syncwarp();
    if (e[s] >= 0) out.sorted_pair_ids[row] = static_cast<int32_t>(i);
    if (i < num_pairs && out.pair_rows) out.pair_rows[i] = row;
  }
}

// Inclusive block-wide scan of one value per thread: shuffles within each warp, then the warp
// totals (one barrier instead of two per doubling step of a shared-memory scan).
__device__ long long block_inclusive_scan(long long v) {
  __shared__ long long warp_total_sh[kWarps];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
#pragma unroll
  for (int offset = 1; offset < 32; offset <<= 1) {
    const long long below = __shfl_up_sync(0xffffffffu, v, offset);
    if (lane >= offset) v += below;
  }
  if (lane == 31) warp_total_sh[warp] = v;
  __syncthreads();
  for (int w = 0; w < warp; ++w) v += warp_total_sh[w];
  return v;
}

// Expert e's run of `padded` rows from `begin`: its tiles, and the sentinel in the rows past its
// `count` pairs.
__device__ void write_expert_run(int e, int begin, int count, int padded, int tile_rows,
                                 int32_t sentinel, const AlignOutputs& out) {
#pragma unroll 1
  for (int t = begin / tile_rows; t < (begin + padded) / tile_rows; ++t) out.tile_experts[t] = e;
#pragma unroll 1
  for (int r = begin + count; r < begin + padded; ++r) out.sorted_pair_ids[r] = sentinel;
}

// The totals (by thread 0) and everything past the padded total (thread `thread` of `threads`):
// no tile there, sentinel rows.
__device__ void write_totals_and_past_end(int padded_total, int active, int num_local,
                                          int tile_rows, int32_t sentinel, int64_t max_padded_rows,
                                          int64_t max_tiles, int thread, int threads,
                                          const AlignOutputs& out) {
  if (thread == 0) {
    out.expert_offsets[num_local] = padded_total;
    *out.padded_total = padded_total;
    if (out.num_active) *out.num_active = active;
  }
#pragma unroll 1
  for (int64_t t = padded_total / tile_rows + thread; t < max_tiles; t += threads)
    out.tile_experts[t] = -1;
#pragma unroll 1
  for (int64_t r = padded_total + thread; r < max_padded_rows; r += threads)
    out.sorted_pair_ids[r] = sentinel;
}

// One block, thread e = local expert e with `count` pairs: lays out the padded expert runs and
// writes everything that does not depend on individual pairs. Returns expert e's first row.
__device__ int write_layout(int count, int num_local, int tile_rows, int32_t sentinel,
                            int64_t max_padded_rows, int64_t max_tiles, const AlignOutputs& out) {
  __shared__ int total_sh, active_sh;
  const int e = threadIdx.x;
  const int padded = (count + tile_rows - 1) / tile_rows * tile_rows;
  // Rows (< 2^31) and active experts (<= 512) scanned together: rows in the high bits.
  const long long both = block_inclusive_scan((static_cast<long long>(padded) << 10) | (count > 0));
  const int end = static_cast<int>(both >> 10);
  const int begin = end - padded;
  const int active_rank = static_cast<int>(both & 1023) - (count > 0 ? 1 : 0);
  if (e == num_local - 1) {
    total_sh = end;
    active_sh = active_rank + (count > 0 ? 1 : 0);
  }
  __syncthreads();
  const int padded_total = total_sh;

  if (e < num_local) {
    out.expert_offsets[e] = begin;
    if (out.expert_counts) out.expert_counts[e] = count;
    write_expert_run(e, begin, count, padded, tile_rows, sentinel, out);
    if (out.active_experts) {
      if (count > 0) out.active_experts[active_rank] = e;
      if (e >= active_sh) out.active_experts[e] = -1;
    }
  }
  write_totals_and_past_end(padded_total, active_sh, num_local, tile_rows, sentinel,
                            max_padded_rows, max_tiles, e, kThreads, out);
  return begin;
}

// kWarpAlignPairs + 1 to kPairsPerBlock pairs: count, layout and placement in one launch.
__global__ void __launch_bounds__(kThreads)
    align_one_block_kernel(const int32_t* __restrict__ topk_ids, int64_t num_pairs, int num_experts,
                           const int32_t* __restrict__ expert_map, int num_local, int tile_rows,
                           int64_t max_padded_rows, int64_t max_tiles, AlignOutputs out) {
  cuda::wait_for_prior_grids();
  cuda::release_dependent_grids();
  __shared__ int table_sh[kWarps][kMaxAlignExperts];
  int e[kSteps];
  load_warp_run(topk_ids, num_pairs, num_experts, expert_map, num_local, out.fault, e);
  count_per_warp(e, num_pairs, num_local, table_sh);
  __syncthreads();
  const int warps = warps_with_pairs(num_pairs);
  int count = 0;
  if (threadIdx.x < num_local)
    for (int w = 0; w < warps; ++w) count += table_sh[w][threadIdx.x];
  const int first_row = write_layout(count, num_local, tile_rows, static_cast<int32_t>(num_pairs),
                                     max_padded_rows, max_tiles, out);
  if (threadIdx.x < num_local) warp_first_rows(threadIdx.x, first_row, warps, table_sh);
  __syncthreads();
  place_pairs(e, num_pairs, table_sh, out);
}

// At most one warp's worth of pairs (decode): one warp, one pair per lane, no barrier. The block
// kernel above took 3-5 us for 2-8 pairs: 16 warps through five barriers, and 608 instructions
// over 90 lines of code, fetched again every forward (bench/NOTES.md, session 11 run 2).
__global__ void __launch_bounds__(kWarpAlignPairs)
    align_one_warp_kernel(const int32_t* __restrict__ topk_ids, int64_t num_pairs, int num_experts,
                          const int32_t* __restrict__ expert_map, int num_local, int tile_rows,
                          int64_t max_padded_rows, int64_t max_tiles, AlignOutputs out) {
  cuda::wait_for_prior_grids();
  cuda::release_dependent_grids();
  const int lane = threadIdx.x;
  const unsigned lanes_below = (1u << lane) - 1u;
  const auto sentinel = static_cast<int32_t>(num_pairs);
  const int e = lane < num_pairs
                    ? local_expert(topk_ids, lane, num_experts, expert_map, num_local, out.fault)
                    : -1;
  const unsigned same = __match_any_sync(0xffffffffu, e);
  // The lowest lane of each expert present leads it: its count, its padded rows.
  const bool leader = e >= 0 && (same & lanes_below) == 0;
  const int count = __popc(same);
  const int padded = leader ? (count + tile_rows - 1) / tile_rows * tile_rows : 0;
  // Every local expert's padded rows and presence (rows in the high bits, as write_layout does),
  // scanned in order: lane l owns experts [l x per_lane, (l + 1) x per_lane).
  __shared__ long long both_sh[kMaxAlignExperts];
  __shared__ int count_sh[kMaxAlignExperts], expert_sh[kWarpAlignPairs];
  const int per_lane = (num_local + kWarpAlignPairs - 1) / kWarpAlignPairs;
  const int x0 = min(lane * per_lane, num_local), x1 = min(x0 + per_lane, num_local);
#pragma unroll 1
  for (int x = x0; x < x1; ++x) both_sh[x] = 0, count_sh[x] = 0;
  __syncwarp();
  if (leader) both_sh[e] = static_cast<long long>(padded) << 10 | 1, count_sh[e] = count;
  __syncwarp();
  long long mine = 0;
#pragma unroll 1
  for (int x = x0; x < x1; ++x) mine += both_sh[x];
  long long below = mine;  // inclusive scan of the lanes' sums, then exclusive
#pragma unroll
  for (int offset = 1; offset < kWarpAlignPairs; offset <<= 1) {
    const long long v = __shfl_up_sync(0xffffffffu, below, offset);
    if (lane >= offset) below += v;
  }
  const long long both_total = __shfl_sync(0xffffffffu, below, kWarpAlignPairs - 1);
  below -= mine;
#pragma unroll 1
  for (int x = x0; x < x1; ++x) {
    const long long v = both_sh[x];
    both_sh[x] = below;
    out.expert_offsets[x] = static_cast<int32_t>(below >> 10);
    if (out.expert_counts) out.expert_counts[x] = count_sh[x];
    below += v;
  }
  const int total = static_cast<int>(both_total >> 10),
            active = static_cast<int>(both_total & 1023);
  __syncwarp();
  // This lane's expert starts after the padded rows of every smaller one and leads as the
  // (experts present before it)-th.
  const long long before = e >= 0 ? both_sh[e] : 0;
  const int begin = static_cast<int>(before >> 10);
  if (leader) expert_sh[before & 1023] = e;
  __syncwarp();

  if (e >= 0) {
    const int row = begin + __popc(same & lanes_below);
    out.sorted_pair_ids[row] = lane;
    if (out.pair_rows) out.pair_rows[lane] = row;
  } else if (lane < num_pairs && out.pair_rows) {
    out.pair_rows[lane] = -1;
  }
  if (leader) write_expert_run(e, begin, count, padded, tile_rows, sentinel, out);
  if (out.active_experts) {
#pragma unroll 1
    for (int x = lane; x < num_local; x += kWarpAlignPairs)
      out.active_experts[x] = x < active ? expert_sh[x] : -1;
  }
  write_totals_and_past_end(total, active, num_local, tile_rows, sentinel, max_padded_rows,
                            max_tiles, lane, kWarpAlignPairs, out);
}

// Many blocks, step 1: per-block counts -> block_counts[block][E_local].
__global__ void __launch_bounds__(kThreads)
    count_kernel(const int32_t* __restrict__ topk_ids, int64_t num_pairs, int num_experts,
                 const int32_t* __restrict__ expert_map, int num_local,
                 int32_t* __restrict__ block_counts) {
  cuda::wait_for_prior_grids();
  cuda::release_dependent_grids();
  __shared__ int table_sh[kWarps][kMaxAlignExperts];
  int e[kSteps];
  // The scatter step reports bad ids: it reads every id too.
  load_warp_run(topk_ids, num_pairs, num_experts, expert_map, num_local, nullptr, e);
  count_per_warp(e, num_pairs, num_local, table_sh);
  __syncthreads();
  if (threadIdx.x < num_local) {
    int count = 0;
    for (int w = 0; w < warps_with_pairs(num_pairs); ++w) count += table_sh[w][threadIdx.x];
    block_counts[int64_t(blockIdx.x) * num_local + threadIdx.x] = count;
  }
}

// Many blocks, step 2 (one block): block_counts becomes each block's first rank per expert
// (in place), then the layout.
__global__ void __launch_bounds__(kThreads)
    layout_kernel(int32_t* __restrict__ block_counts, int num_blocks, int num_local, int tile_rows,
                  int32_t sentinel, int64_t max_padded_rows, int64_t max_tiles, AlignOutputs out) {
  cuda::wait_for_prior_grids();
  cuda::release_dependent_grids();
  constexpr int kBatch = 8;  // loads in flight per thread: the blocks' counts are independent
  int count = 0;
  if (threadIdx.x < num_local) {
    for (int b0 = 0; b0 < num_blocks; b0 += kBatch) {
      int c[kBatch];
#pragma unroll
      for (int i = 0; i < kBatch; ++i)
        c[i] = b0 + i < num_blocks ? block_counts[int64_t(b0 + i) * num_local + threadIdx.x] : 0;
#pragma unroll
      for (int i = 0; i < kBatch; ++i) {
        if (b0 + i < num_blocks) block_counts[int64_t(b0 + i) * num_local + threadIdx.x] = count;
        count += c[i];
      }
    }
  }
  write_layout(count, num_local, tile_rows, sentinel, max_padded_rows, max_tiles, out);
}

// Many blocks, step 3: places every pair at offset[e] + its rank within expert e.
__global__ void __launch_bounds__(kThreads)
    scatter_kernel(const int32_t* __restrict__ topk_ids, int64_t num_pairs, int num_experts,
                   const int32_t* __restrict__ expert_map, int num_local,
                   const int32_t* __restrict__ block_first_rank, AlignOutputs out) {
  cuda::wait_for_prior_grids();
  cuda::release_dependent_grids();
  __shared__ int table_sh[kWarps][kMaxAlignExperts];
  int e[kSteps];
  load_warp_run(topk_ids, num_pairs, num_experts, expert_map, num_local, out.fault, e);
  count_per_warp(e, num_pairs, num_local, table_sh);
  __syncthreads();
  if (threadIdx.x < num_local)
    warp_first_rows(threadIdx.x,
                    out.expert_offsets[threadIdx.x] +
                        block_first_rank[int64_t(blockIdx.x) * num_local + threadIdx.x],
                    warps_with_pairs(num_pairs), table_sh);
  __syncthreads();
  place_pairs(e, num_pairs, table_sh, out);
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

  const int64_t max_tiles = max_padded_rows / tile_rows;
  const auto sentinel = static_cast<int32_t>(num_pairs);
  if (blocks <= 1) {
    const bool one_warp = num_pairs <= kWarpAlignPairs;
    return cuda::launch_dependent(one_warp ? align_one_warp_kernel : align_one_block_kernel, 1,
                                  one_warp ? kWarpAlignPairs : kThreads, 0, stream, topk_ids,
                                  num_pairs, ids_range, expert_map, num_local, tile_rows,
                                  max_padded_rows, max_tiles, out);
  }
  if (const cudaError_t err =
          cuda::launch_dependent(count_kernel, blocks, kThreads, 0, stream, topk_ids, num_pairs,
                                 ids_range, expert_map, num_local, block_counts);
      err != cudaSuccess)
    return err;
  if (const cudaError_t err =
          cuda::launch_dependent(layout_kernel, 1, kThreads, 0, stream, block_counts, blocks,
                                 num_local, tile_rows, sentinel, max_padded_rows, max_tiles, out);
      err != cudaSuccess)
    return err;
  return cuda::launch_dependent(scatter_kernel, blocks, kThreads, 0, stream, topk_ids, num_pairs,
                                ids_range, expert_map, num_local, block_counts, out);
}

}  // namespace qmoe
