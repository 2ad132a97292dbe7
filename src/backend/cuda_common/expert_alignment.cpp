#include "backend/cuda_common/expert_alignment.hpp"

#include "cuda/cuda_check.hpp"

namespace qmoe::cuda_common {

AlignOutputs workspace_alignment(const Workspace& ws, unsigned long long* fault) {
  AlignOutputs aligned;
  aligned.sorted_pair_ids = ws.sorted_pair_ids.as<int32_t>();
  aligned.tile_experts = ws.tile_experts.as<int32_t>();
  aligned.expert_offsets = ws.expert_offsets.as<int32_t>();
  aligned.padded_total = ws.padded_total.as<int32_t>();
  aligned.pair_rows = ws.pair_rows.as<int32_t>();
  aligned.fault = fault;
  return aligned;
}

AlignOutputs align_in_workspace(const Workspace& ws, const int32_t* topk_ids, int64_t pairs,
                                int64_t E, int tile_rows, unsigned long long* fault,
                                cudaStream_t stream) {
  const AlignOutputs aligned = workspace_alignment(ws, fault);
  // Every expert of the layer is local (no expert map): a rank of an expert-parallel plan gets
  // its experts' weights and localized ids (src/dist/).
  QMOE_CUDA_CHECK(align_by_expert_cuda(topk_ids, pairs, E, nullptr, E, tile_rows,
                                       ws.align_scratch.data(), ws.align_scratch.bytes(), aligned,
                                       stream));
  return aligned;
}

}  // namespace qmoe::cuda_common
