#include "backend/cuda_mma/workspace_need.hpp"

#include "backend/cuda_mma/expert_gemm.hpp"
#include "core/check.hpp"

namespace qmoe::cuda_mma {

using cuda_common::WorkspaceSizes;

WorkspaceSizes workspace_sizes(int64_t tokens, int top_k, int64_t E, int64_t H, int64_t I) {
  check(tokens >= 1, "cuda-mma: a workspace holds at least 1 token, asked for {}", tokens);
  const AlignSizes align = workspace_align_sizes(tokens, top_k, E);
  const auto rows = size_t(align.max_padded_rows);
  WorkspaceSizes s = cuda_common::routing_sizes(tokens, top_k, E, align);
  s.activated = rows * size_t(I) * 2;
  s.gemm2_out = rows * size_t(H) * 2;
  // Tail split buffers only where some batch takes tiles that may split (shared tiles): 8 MB
  // that decode-only workspaces would never use.
  if (tallest_tile_rows(tokens, top_k, E) >= kMinSharedTileRows) {
    s.tail_partials = size_t(kTailPartialBytes);
    s.tail_flags = size_t(kMaxTailSlots) * sizeof(int32_t);
  }
  return s;
}

}  // namespace qmoe::cuda_mma
