#pragma once
// Token alignment by expert (the grouped GEMM's row order). The M*k (token, slot) pairs of
// topk_ids [M, k] (pair i = m*k + j) are grouped by expert, in increasing pair index within an
// expert (deterministic, so results are reproducible), and each expert's run is padded up to a
// multiple of `tile_rows`, so every tile of `tile_rows` sorted rows belongs to one expert.
//
// Expert parallelism: with an expert map ([E] global id -> local id, or -1 when the expert is not
// on this rank) everything below lives in *local* expert ids 0..E_local-1. Pairs of non-local
// experts (and ids outside 0..E-1) are dropped: they get no rows and no tiles, pair_rows = -1,
// and so contribute zeros in combine_topk_cuda. Without a map, local id = global id. An id of
// kExpertNotHere (-1, qmoe/shard.hpp) is dropped the same way without being reported.
//
// Example (tile 4, E 5, no map): topk_ids [[2,3,4],[1,2,4],[1,3,4],[1,2,3]] ->
//   sorted_pair_ids [3,6,9,12, 0,4,10,12, 1,7,11,12, 2,5,8,12] (12 = sentinel = M*k),
//   tile_experts [1,2,3,4,-1...], expert_offsets [0,0,4,8,12,16], padded_total 16.
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "cuda/limits.hpp"

namespace qmoe {

struct AlignSizes {
  int64_t max_padded_rows = 0;  // length of sorted_pair_ids: M*k + min(E_local, M*k)*(tile-1)
  int64_t max_tiles = 0;        // length of tile_experts: max_padded_rows / tile_rows
  size_t workspace_bytes = 0;   // scratch for align_by_expert_cuda
};

// Sizes for num_pairs = M*k. They grow with num_pairs, so buffers sized for the largest M serve
// every smaller M. Throws qmoe::Error for E_local outside 1..512 or tile_rows < 1.
AlignSizes align_sizes(int64_t num_pairs, int64_t num_local_experts, int tile_rows);

// Device outputs. Required: sorted_pair_ids, tile_experts, expert_offsets, padded_total.
// Optional (nullptr = not written): expert_counts, active_experts + num_active, pair_rows.
struct AlignOutputs {
  int32_t* sorted_pair_ids = nullptr;  // [max_padded_rows] pair index; padding = M*k (sentinel)
  int32_t* tile_experts = nullptr;     // [max_tiles] local expert of each tile; -1 past the end
  int32_t* expert_offsets = nullptr;   // [E_local + 1] first sorted row of each expert; [E_local]
                                       // = padded total
  int32_t* padded_total = nullptr;     // [1] sum over experts of round_up(count, tile_rows)
  int32_t* expert_counts = nullptr;    // [E_local] pairs per local expert (unpadded)
  int32_t* active_experts = nullptr;   // [E_local] local experts with pairs, ascending; then -1
  int32_t* num_active = nullptr;       // [1] how many entries of active_experts are valid
  int32_t* pair_rows = nullptr;        // [M*k] sorted row of each pair; -1 = dropped (EP)
  // Where a pair with an id outside 0..E-1 is reported (RoutingReport::device_word()); such pairs
  // are dropped either way. nullptr: not reported.
  unsigned long long* fault = nullptr;
};

// topk_ids: device i32 [num_pairs] (= [M, k] contiguous). expert_map: device i32 [num_experts]
// or nullptr (then num_local_experts must equal num_experts). Every output element listed above
// is written (whole arrays, up to their max lengths), so nothing needs clearing beforehand.
// workspace: at least align_sizes(...).workspace_bytes. One launch up to 4096 pairs, three
// beyond; no host sync.
cudaError_t align_by_expert_cuda(const int32_t* topk_ids, int64_t num_pairs, int64_t num_experts,
                                 const int32_t* expert_map, int64_t num_local_experts,
                                 int tile_rows, void* workspace, size_t workspace_bytes,
                                 const AlignOutputs& out, cudaStream_t stream);

}  // namespace qmoe
