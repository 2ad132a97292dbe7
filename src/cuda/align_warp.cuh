#pragma once
// Device pieces of the alignment by expert (align.hpp) that a kernel other than the alignment's
// own can run: a pair's local expert, and the alignment of at most one warp's worth of pairs by
// one warp, without shared memory or barriers, so a kernel can align a decode batch's few pairs
// in its own prologue instead of waiting on a launch of its own for them.
#include <cstdint>

#include "cuda/routing_fault.cuh"
#include "qmoe/shard.hpp"

namespace qmoe::cuda {

inline constexpr int kWarpAlignPairs = 32;

// fault: where an id outside 0..E-1 is reported (nullptr: not reported), routing_fault.cuh.
// kExpertNotHere (-1) marks a slot whose expert lives on another rank: dropped, not a fault.
__device__ __forceinline__ int local_expert(const int32_t* topk_ids, int64_t i, int num_experts,
                                            const int32_t* expert_map, int num_local,
                                            unsigned long long* fault) {
  const int e = topk_ids[i];
  if (e == kExpertNotHere) return -1;
  if (e < 0 || e >= num_experts) {
    report_routing_fault(fault, RoutingFault::expert_id, i, static_cast<uint32_t>(e));
    return -1;
  }
  const int local = expert_map ? expert_map[e] : e;
  return local < num_local ? local : -1;
}

// The rows of num_pairs <= kWarpAlignPairs pairs (lane l takes pair l), in align_by_expert_cuda's
// order: experts ascending, pairs ascending inside an expert, each expert's run padded to whole
// tiles of tile_rows with the sentinel num_pairs. Writes sorted_pair_ids[0, total),
// tile_experts[0, total / tile_rows) and, where not null, pair_rows[0, num_pairs) (-1: dropped);
// returns total (the padded row count) in every lane. The whole warp calls it.
__device__ __forceinline__ int align_pairs_in_warp(const int32_t* topk_ids, int num_pairs,
                                                   int num_experts, const int32_t* expert_map,
                                                   int num_local, int tile_rows,
                                                   unsigned long long* fault,
                                                   int32_t* sorted_pair_ids, int32_t* tile_experts,
                                                   int32_t* pair_rows) {
  constexpr unsigned kAll = 0xffffffffu;
  const int lane = static_cast<int>(threadIdx.x % 32);
  const unsigned lanes_below = (1u << lane) - 1u;
  const int e = lane < num_pairs
                    ? local_expert(topk_ids, lane, num_experts, expert_map, num_local, fault)
                    : -1;
  const unsigned same = __match_any_sync(kAll, e);
  // The lowest lane of each expert present leads it.
  const bool leader = e >= 0 && (same & lanes_below) == 0;
  const int count = __popc(same);
  const int padded = leader ? (count + tile_rows - 1) / tile_rows * tile_rows : 0;
  // An expert's run starts after the runs of every smaller expert present: one step per
  // leader (as many as distinct experts, at most 32), the same steps in every lane.
  int begin = 0, total = 0;
  for (unsigned leaders = __ballot_sync(kAll, leader); leaders != 0; leaders &= leaders - 1) {
    const int l = __ffs(leaders) - 1;
    const int other = __shfl_sync(kAll, e, l), rows = __shfl_sync(kAll, padded, l);
    if (other < e) begin += rows;
    total += rows;
  }
  const int row = begin + __popc(same & lanes_below);
  if (e >= 0) sorted_pair_ids[row] = lane;
  if (pair_rows && lane < num_pairs) pair_rows[lane] = e >= 0 ? row : -1;
  if (leader) {
    for (int r = begin + count; r < begin + padded; ++r) sorted_pair_ids[r] = num_pairs;
    for (int t = begin / tile_rows; t < (begin + padded) / tile_rows; ++t) tile_experts[t] = e;
  }
  return total;
}

}  // namespace qmoe::cuda
