#pragma once
// The first step of every CUDA forward after routing: the (token, slot) pairs sorted by expert and
// padded to whole tiles of `tile_rows` rows (align_by_expert_cuda), into a stream's workspace.
#include <cuda_runtime_api.h>

#include <cstdint>

#include "backend/cuda_common/workspace_pool.hpp"
#include "cuda/align.hpp"

namespace qmoe::cuda_common {

// topk_ids: i32 [pairs] on the device, global expert ids of E. The workspace holds the alignment
// of `pairs` at `tile_rows` (routing_sizes). Ids outside 0..E-1 are dropped and reported into
// `fault` (the layer's RoutingReport::device_word()).
// Where the workspace holds an alignment (as align_in_workspace fills it), for a kernel that
// aligns the pairs itself (cuda-mma's FusedAlignment).
AlignOutputs workspace_alignment(const Workspace& ws, unsigned long long* fault);

AlignOutputs align_in_workspace(const Workspace& ws, const int32_t* topk_ids, int64_t pairs,
                                int64_t E, int tile_rows, unsigned long long* fault,
                                cudaStream_t stream);

}  // namespace qmoe::cuda_common
