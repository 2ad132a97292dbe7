#pragma once
// The workspace a cuda-mma layer needs: its routing and alignment at the tile each batch takes,
// the GEMMs' sorted 16-bit rows and, where tiles may split their last round, the tail buffers.
#include <cstdint>

#include "backend/cuda_common/workspace_sizes.hpp"

namespace qmoe::cuda_mma {

// The buffers one layer (E experts, hidden H, intermediate I, top-k) needs for any batch of 1 to
// `tokens` tokens at the tile choose_tile_rows picks for it.
cuda_common::WorkspaceSizes workspace_sizes(int64_t tokens, int top_k, int64_t E, int64_t H,
                                            int64_t I);

}  // namespace qmoe::cuda_mma
