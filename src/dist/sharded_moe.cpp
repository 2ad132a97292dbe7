#include <fmt/format.h>

#include "core/check.hpp"
#include "qmoe/distributed.hpp"
#include "route/routing_contract.hpp"
#include "route/topk.hpp"

namespace qmoe {

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
      local_(shard_config(config, plan, comm.rank()), std::move(rank_experts), backend, device) {
  check(comm.size() == plan.world_size(),
        "ShardedMoE: the communicator has {} ranks but the plan (tp {} x ep {}) needs {}",
        comm.size(), plan.spec.tp_size, plan.spec.ep_size, plan.world_size());
  check(device.kind == DeviceKind::cpu,
        "ShardedMoE: ranks on {} are not supported yet (CPU ranks only; CUDA ranks over NCCL are "
        "planned)",
        to_string(device));
}

void ShardedMoE::partial_forward(TensorView hidden, TensorView router_logits,
                                 TensorView out) const {
  const int64_t M = hidden.dim(0), E = config_.num_experts, k = config_.top_k();
  check(router_logits.dtype() == DType::f32 && router_logits.rank() == 2 &&
            router_logits.dim(0) == M && router_logits.dim(1) == E &&
            router_logits.is_contiguous() && router_logits.device().kind == DeviceKind::cpu,
        "ShardedMoE: router_logits is {}, expected contiguous host f32[{}, {}] (all {} experts of "
        "the layer)",
        router_logits.describe(), M, E, E);
  check_router_logits(router_logits.data_as<float>(), M, E);
  Buffer weights(DType::f32, {M, k}), ids(DType::i32, {M, k});
  route_topk(config_.routing, router_logits.data_as<float>(), M, E, weights.data_as<float>(),
             ids.data_as<int32_t>());
  const LocalRouting local = localize_routing(plan_, comm_->rank(), weights.view(), ids.view());
  local_.forward_routed(hidden, local.topk_weights.view(), local.topk_ids.view(), out);
}

void ShardedMoE::forward(TensorView hidden, TensorView router_logits, TensorView out) const {
  partial_forward(hidden, router_logits, out);
  comm_->all_reduce_sum(out);
}

void ShardedMoE::forward_token_split(TensorView hidden, TensorView router_logits,
                                     TensorView out) const {
  const int64_t n = hidden.dim(0), H = config_.hidden, E = config_.num_experts;
  const int64_t all = n * comm_->size();
  Buffer all_hidden(hidden.dtype(), {all, H}), all_logits(DType::f32, {all, E});
  comm_->all_gather(hidden, all_hidden.view());
  comm_->all_gather(router_logits, all_logits.view());
  Buffer partial(out.dtype(), {all, H});
  partial_forward(all_hidden.view(), all_logits.view(), partial.view());
  comm_->reduce_scatter_sum(partial.view(), out);
}

}  // namespace qmoe
