#include "backend/cuda_common/workspace_sizes.hpp"

#include <algorithm>

#include "core/check.hpp"

namespace qmoe::cuda_common {

namespace {

// Every size field, for the element-wise operations below.
constexpr size_t WorkspaceSizes::*kFields[] = {
    &WorkspaceSizes::topk_weights,    &WorkspaceSizes::topk_ids,
    &WorkspaceSizes::sorted_pair_ids, &WorkspaceSizes::tile_experts,
    &WorkspaceSizes::expert_offsets,  &WorkspaceSizes::padded_total,
    &WorkspaceSizes::pair_rows,       &WorkspaceSizes::align_scratch,
    &WorkspaceSizes::activated,       &WorkspaceSizes::gemm2_out,
    &WorkspaceSizes::tail_partials,   &WorkspaceSizes::tail_flags,
    &WorkspaceSizes::gathered,        &WorkspaceSizes::gemm1_out,
    &WorkspaceSizes::group_args,      &WorkspaceSizes::gemm_scratch,
    &WorkspaceSizes::row_group_sums};

}  // namespace

size_t WorkspaceSizes::total() const {
  size_t sum = 0;
  for (auto field : kFields) sum += this->*field;
  return sum;
}

bool WorkspaceSizes::holds(const WorkspaceSizes& need) const {
  return std::ranges::all_of(kFields, [&](auto field) { return this->*field >= need.*field; });
}

WorkspaceSizes routing_sizes(int64_t tokens, int top_k, int64_t E, const AlignSizes& align) {
  const auto pairs = size_t(tokens * top_k);
  WorkspaceSizes s;
  s.tokens = tokens;
  s.topk_weights = pairs * sizeof(float);
  s.topk_ids = pairs * sizeof(int32_t);
  s.sorted_pair_ids = size_t(align.max_padded_rows) * sizeof(int32_t);
  s.tile_experts = size_t(align.max_tiles) * sizeof(int32_t);
  s.expert_offsets = size_t(E + 1) * sizeof(int32_t);
  s.padded_total = sizeof(int32_t);
  s.pair_rows = pairs * sizeof(int32_t);
  s.align_scratch = std::max<size_t>(align.workspace_bytes, 1);
  return s;
}

WorkspaceSizes covering(const WorkspaceSizes& a, const WorkspaceSizes& b) {
  WorkspaceSizes c;
  c.tokens = std::max(a.tokens, b.tokens);
  for (auto field : kFields) c.*field = std::max(a.*field, b.*field);
  return c;
}

WorkspaceSizes grown_sizes(const WorkspaceSizes& have, const WorkspaceSizes& need, bool capturing,
                           const std::string& where) {
  if (have.holds(need)) return have;
  check(!capturing,
        "a CUDA forward of {} tokens on {} needs a larger workspace (it holds {} tokens' "
        "worth, {} bytes) while that stream is capturing a CUDA graph, where memory cannot be "
        "allocated: call MoE::reserve(max_tokens, stream) with the largest batch before capturing",
        need.tokens, where, have.tokens, have.total());
  return covering(have, need);
}

}  // namespace qmoe::cuda_common
