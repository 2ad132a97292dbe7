#pragma once
// The whole layer's top-k ids as one expert-parallel rank sees them, on its GPU: ids of the
// rank's experts [first, first + count) become local ids 0..count-1, every other slot
// kExpertNotHere (dropped by the rank's alignment, so it costs nothing). In place;
// graph-capturable.
#include <cuda_runtime_api.h>

#include <cstdint>

namespace qmoe {

cudaError_t localize_routing_cuda(int32_t* topk_ids, int64_t pairs, int32_t first, int32_t count,
                                  cudaStream_t stream);

}  // namespace qmoe
