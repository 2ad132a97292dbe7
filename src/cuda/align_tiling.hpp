#pragma once
// How align_by_expert_cuda cuts the (token, slot) pairs into blocks, shared by the kernels and
// the host-side size queries so the two cannot disagree.
#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace qmoe::align_tiling {

// Each block takes kPairsPerBlock consecutive pairs; each of its kWarps warps a contiguous run of
// kPairsPerWarp. Ranks inside an expert are then (pairs of the expert in earlier blocks) + (in
// earlier warps of this block) + (in earlier steps of this warp) + (in lower lanes of this step):
// increasing pair order, with no atomics deciding the order.
inline constexpr int kWarps = 16;
inline constexpr int kThreads = kWarps * 32;
inline constexpr int kPairsPerWarp = 256;
inline constexpr int kPairsPerBlock = kWarps * kPairsPerWarp;
inline constexpr int64_t kMaxPairs = int64_t(1) << 30;

inline int64_t blocks_for(int64_t num_pairs) {
  return (num_pairs + kPairsPerBlock - 1) / kPairsPerBlock;
}
// Per-block counts of every local expert.
inline size_t workspace_bytes(int64_t num_pairs, int64_t num_local) {
  return sizeof(int32_t) *
         static_cast<size_t>(std::max<int64_t>(1, blocks_for(num_pairs)) * num_local);
}
// Each expert with pairs pads by at most tile_rows - 1, and at most num_pairs experts have pairs.
inline int64_t max_padded_rows(int64_t num_pairs, int64_t num_local, int tile_rows) {
  return num_pairs + std::min(num_local, num_pairs) * (tile_rows - 1);
}

}  // namespace qmoe::align_tiling
