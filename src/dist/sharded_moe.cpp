#include <fmt/format.h>

#include "core/check.hpp"
#include "dist/rank_scratch.hpp"
#include "qmoe/distributed.hpp"

namespace qmoe {

namespace {

std::unique_ptr<RankScratch> scratch_for(const MoEConfig& config, const ShardPlan& plan, int rank,
                                         Device device) {
  if (device.kind == DeviceKind::cuda) return cuda_rank_scratch(config, plan, rank, device.index);
  return host_rank_scratch(config, plan, rank);
}

}  // namespace

ShardedMoE::ShardedMoE(const MoEConfig& config, const QuantizedExperts& experts,
                       const ShardPlan& plan, Communicator& comm, const std::string& backend,
                       Device device)
    : ShardedMoE(RankSlice{}, config, shard_experts(experts, plan, comm.rank()), plan, comm,
                 backend, device) {}

ShardedMoE ShardedMoE::of_rank(const MoEConfig& config, QuantizedExperts rank_experts,
                               const ShardPlan& plan, Communicator& comm,
                               const std::string& backend, Device device) {
  return ShardedMoE(RankSlice{}, config, std::move(rank_experts), plan, comm, backend, device);
}

ShardedMoE::ShardedMoE(RankSlice, const MoEConfig& config, QuantizedExperts rank_experts,
                       const ShardPlan& plan, Communicator& comm, const std::string& backend,
                       Device device)
    : config_(config),
      plan_(plan),
      comm_(&comm),
      local_(shard_config(config, plan, comm.rank()), std::move(rank_experts), backend, device),
      scratch_(scratch_for(config, plan, comm.rank(), device)) {
  check(comm.size() == plan.world_size(),
        "ShardedMoE: the communicator has {} ranks but the plan (tp {} x ep {}) needs {}",
        comm.size(), plan.spec.tp_size, plan.spec.ep_size, plan.world_size());
}

ShardedMoE::ShardedMoE(ShardedMoE&&) noexcept = default;
ShardedMoE::~ShardedMoE() = default;

void ShardedMoE::reserve(int64_t max_tokens, void* stream) const {
  check(max_tokens >= 0, "ShardedMoE::reserve: {} tokens", max_tokens);
  local_.reserve(max_tokens, stream);
  scratch_->reserve(max_tokens, config_.hidden, config_.num_experts, stream);
}

void ShardedMoE::partial_forward(TensorView hidden, TensorView router_logits, TensorView out,
                                 void* stream) const {
  const RankScratch::Routing local = scratch_->route(router_logits, stream);
  check(local.topk_ids.dim(0) == hidden.dim(0),
        "ShardedMoE (rank {}): router_logits has {} rows but hidden {}", rank(),
        local.topk_ids.dim(0), hidden.dim(0));
  local_.forward_routed(hidden, local.topk_weights, local.topk_ids, out, stream);
}

void ShardedMoE::forward(TensorView hidden, TensorView router_logits, TensorView out,
                         void* stream) const {
  partial_forward(hidden, router_logits, out, stream);
  comm_->all_reduce_sum(out, stream);
}

void ShardedMoE::forward_token_split(TensorView hidden, TensorView router_logits, TensorView out,
                                     void* stream) const {
  const int64_t n = hidden.dim(0), H = config_.hidden, E = config_.num_experts;
  const int64_t all = n * comm_->size();
  const TensorView all_hidden =
      scratch_->tensor(RankScratch::gathered_hidden, hidden.dtype(), all, H, stream);
  const TensorView all_logits =
      scratch_->tensor(RankScratch::gathered_logits, DType::f32, all, E, stream);
  const TensorView partial =
      scratch_->tensor(RankScratch::partial_out, out.dtype(), all, H, stream);
  comm_->all_gather(hidden, all_hidden, stream);
  comm_->all_gather(router_logits, all_logits, stream);
  partial_forward(all_hidden, all_logits, partial, stream);
  comm_->reduce_scatter_sum(partial, out, stream);
}

}  // namespace qmoe
