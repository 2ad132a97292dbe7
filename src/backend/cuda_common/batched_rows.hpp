#pragma once
// The batched-experts format on CUDA (BatchedBatch): x [E, T_max, H] arrives grouped by expert,
// so the work list the expert GEMMs take (align.hpp's outputs) comes straight from the counts,
// and each expert's output rows go back to their place in out afterwards.
#include <cuda_runtime_api.h>

#include <cstdint>

#include "cuda/align.hpp"

namespace qmoe::cuda_common {

// Row t of expert e (flat row e * T_max + t of x) is "pair" e * T_max + t at top-k 1, for
// t < counts[e] (device i32 [E]): expert e's rows become sorted rows expert_offsets[e] + t,
// padded to whole tiles of `tile_rows` with the sentinel E * T_max, laid out as
// align_by_expert_cuda lays out routed pairs. Writes sorted_pair_ids, tile_experts,
// expert_offsets and padded_total, whole arrays up to align_sizes(E * T_max, E, tile_rows); the
// other outputs are not written. A count outside 0..T_max is clamped into it and reported into
// out.fault (RoutingFault::batched_count). E in 1..kMaxAlignExperts; one block, no host sync.
cudaError_t align_batched_cuda(const int32_t* counts, int64_t E, int64_t T_max, int tile_rows,
                               const AlignOutputs& out, cudaStream_t stream);

// For every e and t below counts[e] (clamped as above): row e * T_max + t of out = sorted row
// expert_offsets[e] + t of in. Rows of 16-bit values (bf16/f16), H per row, both contiguous;
// other rows of out are not written.
cudaError_t scatter_batched_rows_cuda(const void* in, const int32_t* counts,
                                      const int32_t* expert_offsets, int64_t E, int64_t T_max,
                                      int64_t H, void* out, cudaStream_t stream);

}  // namespace qmoe::cuda_common
