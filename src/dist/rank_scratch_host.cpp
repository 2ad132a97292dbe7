// A host rank: CPU reference routing, localized with localize_routing (remote slots become local
// id 0 with weight 0, which host backends compute and weigh by zero).
#include <array>

#include "core/check.hpp"
#include "dist/rank_scratch.hpp"
#include "route/routing_contract.hpp"
#include "route/topk.hpp"

namespace qmoe {

namespace {

class HostRankScratch final : public RankScratch {
 public:
  HostRankScratch(const MoEConfig& config, const ShardPlan& plan, int rank)
      : config_(config), plan_(plan), rank_(rank) {}

  Routing route(TensorView logits, void* /*stream*/) override {
    const int64_t E = config_.num_experts, k = config_.top_k();
    check(logits.dtype() == DType::f32 && logits.rank() == 2 && logits.dim(1) == E &&
              logits.is_contiguous() && logits.device().kind == DeviceKind::cpu,
          "ShardedMoE (rank {}): router_logits is {}, expected contiguous host f32[M, {}] (all {} "
          "experts of the layer)",
          rank_, logits.describe(), E, E);
    const int64_t M = logits.dim(0);
    check_router_logits(logits.data_as<float>(), M, E);
    Buffer weights(DType::f32, {M, k}), ids(DType::i32, {M, k});
    route_topk(config_.routing, logits.data_as<float>(), M, E, weights.data_as<float>(),
               ids.data_as<int32_t>());
    local_ = localize_routing(plan_, rank_, weights.view(), ids.view());
    return {local_.topk_weights.view(), local_.topk_ids.view()};
  }

  TensorView tensor(Slot slot, DType dtype, int64_t rows, int64_t cols, void* /*stream*/) override {
    Buffer& b = slots_[size_t(slot)];
    const int64_t bytes = rows * cols * size_of(dtype);
    if (b.nbytes() < bytes) b = Buffer(DType::u8, {bytes});
    return TensorView(b.data(), dtype, {rows, cols});
  }

 protected:
  void route_reserve(int64_t, void*) override {}

 private:
  MoEConfig config_;
  ShardPlan plan_;
  int rank_;
  LocalRouting local_;
  std::array<Buffer, kSlots> slots_;
};

}  // namespace

std::unique_ptr<RankScratch> host_rank_scratch(const MoEConfig& config, const ShardPlan& plan,
                                               int rank) {
  return std::make_unique<HostRankScratch>(config, plan, rank);
}

}  // namespace qmoe
