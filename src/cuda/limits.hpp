#pragma once
// The largest layers the shared GPU steps take, in a header without CUDA so that the CUDA
// backends' descriptors (compiled in every build) declare the same numbers the kernels enforce.
namespace qmoe {

// Top-k routing runs one warp per token over all E logits, keeping k candidates in registers.
inline constexpr int kMaxRoutingExperts = 512;
inline constexpr int kMaxRoutingTopK = 16;
// Alignment by expert keeps a per-warp count table of the local experts in shared memory.
inline constexpr int kMaxAlignExperts = 512;

}  // namespace qmoe
