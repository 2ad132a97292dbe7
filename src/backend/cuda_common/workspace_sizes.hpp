#pragma once
// What a CUDA forward writes besides `out`, in bytes per buffer, and when the workspace that holds
// it must grow. Each backend fills the buffers it uses and leaves the others zero (cuda-mma:
// workspace_need.hpp; cuda-wgmma: sizes_for in cuda_wgmma.cpp). Host arithmetic only (no device
// needed), so CI checks it without a GPU.
#include <cstddef>
#include <cstdint>
#include <string>

#include "cuda/align.hpp"

namespace qmoe::cuda_common {

struct WorkspaceSizes {
  int64_t tokens = 0;  // the largest batch these sizes were computed for (for messages)
  size_t topk_weights = 0, topk_ids = 0;  // the forward's own routing
  size_t sorted_pair_ids = 0, tile_experts = 0, expert_offsets = 0, padded_total = 0;
  size_t pair_rows = 0, align_scratch = 0;
  size_t activated = 0, gemm2_out = 0;  // 16-bit rows in sorted order
  // The expert GEMMs' split last rounds (partial sums and their flags).
  size_t tail_partials = 0, tail_flags = 0;
  // Token rows gathered by expert, GEMM1's raw output (when the activation is a pass of its own),
  // the grouped GEMMs' per-expert arguments, a GEMM library's own scratch, and the input rows'
  // sums per quantization group (zero points applied after the GEMM).
  size_t gathered = 0, gemm1_out = 0, group_args = 0, gemm_scratch = 0, row_group_sums = 0;

  size_t total() const;
  // Whether every buffer of `this` is at least as large as that of `need`.
  bool holds(const WorkspaceSizes& need) const;
  friend bool operator==(const WorkspaceSizes&, const WorkspaceSizes&) = default;
};

// The routing and alignment buffers of a forward of up to `tokens` (>= 1) tokens at top-k of E
// experts, aligned as `align` (align_sizes for those pairs) says; every other field zero.
WorkspaceSizes routing_sizes(int64_t tokens, int top_k, int64_t E, const AlignSizes& align);

// The buffer-by-buffer maximum: one workspace that serves layers of different shapes.
WorkspaceSizes covering(const WorkspaceSizes& a, const WorkspaceSizes& b);

// The sizes a stream's workspace must grow to so that it holds `need`, or `have` when it already
// does. Growing allocates, which a stream capturing a CUDA graph cannot do (and the graph would
// keep pointers into the old buffers): then Error telling the caller to reserve first.
// `where` names the stream in that message.
WorkspaceSizes grown_sizes(const WorkspaceSizes& have, const WorkspaceSizes& need, bool capturing,
                           const std::string& where);

}  // namespace qmoe::cuda_common
