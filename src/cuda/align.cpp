#include "cuda/align.hpp"
#include "core/check.hpp"
#include "cuda/align_tiling.hpp"

namespace qmoe {

AlignSizes align_sizes(int64_t num_pairs, int64_t num_local_experts, int tile_rows) {
  check(num_local_experts >= 1 && num_local_experts <= kMaxAlignExperts,
        "alignment by expert: {} local experts, supported 1..{}", num_local_experts,
        kMaxAlignExperts);
  check(tile_rows >= 1, "alignment by expert: tile height {} must be at least 1", tile_rows);
  check(num_pairs >= 0 && num_pairs < align_tiling::kMaxPairs,
        "alignment by expert: {} (token, slot) pairs, supported 0..{}", num_pairs,
        align_tiling::kMaxPairs - 1);
  AlignSizes s;
  s.max_padded_rows = align_tiling::max_padded_rows(num_pairs, num_local_experts, tile_rows);
  s.max_tiles = s.max_padded_rows / tile_rows;
  s.workspace_bytes = align_tiling::workspace_bytes(num_pairs, num_local_experts);
  return s;
}

}  // namespace qmoe
