// A CUDA rank: the layer's top-k on the rank's GPU (the same kernel and selection as a CUDA
// backend's routing), then localized in place; non-finite weights are reported like a layer's.
#include <array>

#include "core/check.hpp"
#include "cuda/device_buffer.hpp"
#include "cuda/device_scope.hpp"
#include "cuda/routing.hpp"
#include "cuda/routing_report.hpp"
#include "dist/localize_routing.hpp"
#include "dist/rank_scratch.hpp"

namespace qmoe {

namespace {

class CudaRankScratch final : public RankScratch {
 public:
  CudaRankScratch(const MoEConfig& config, const ShardPlan& plan, int rank, int device)
      : config_(config), shard_(plan.ranks.at(size_t(rank))), device_(device) {
    DeviceScope scope(device);
    bias_ = to_device(config.routing.correction_bias);
    report_ = std::make_unique<RoutingReport>();
    params_ = routing_params(config.routing, bias_.empty() ? nullptr : bias_.as<float>());
    params_.fault = report_->device_word();
    validate_routing(params_, config.num_experts);
  }

  Routing route(TensorView logits, void* stream) override {
    const int64_t E = config_.num_experts, k = config_.top_k();
    report_->throw_if_reported("ShardedMoE routing", int(k), E);
    check(logits.dtype() == DType::f32 && logits.rank() == 2 && logits.dim(1) == E &&
              logits.is_contiguous() && logits.device() == Device{DeviceKind::cuda, device_},
          "ShardedMoE (rank {}): router_logits is {}, expected contiguous f32[M, {}] on cuda:{} "
          "(all {} experts of the layer)",
          shard_.rank, logits.describe(), E, device_, E);
    const int64_t M = logits.dim(0);
    route_reserve(M, stream);
    DeviceScope scope(device_);
    const auto s = static_cast<cudaStream_t>(stream);
    float* weights = weights_.as<float>();
    int32_t* ids = ids_.as<int32_t>();
    QMOE_CUDA_CHECK(
        route_topk_cuda(params_, logits.data_as<const float>(), E, M, E, weights, ids, s));
    QMOE_CUDA_CHECK(localize_routing_cuda(ids, M * k, int32_t(shard_.first_expert),
                                          int32_t(shard_.num_experts), s));
    const Device here{DeviceKind::cuda, device_};
    return {TensorView(weights, DType::f32, {M, k}, here),
            TensorView(ids, DType::i32, {M, k}, here)};
  }

  TensorView tensor(Slot slot, DType dtype, int64_t rows, int64_t cols, void* stream) override {
    grow(slots_[size_t(slot)], size_t(rows * cols) * size_of(dtype), stream);
    return TensorView(slots_[size_t(slot)].data(), dtype, {rows, cols},
                      Device{DeviceKind::cuda, device_});
  }

 protected:
  void route_reserve(int64_t tokens, void* stream) override {
    const size_t pairs = size_t(tokens * config_.top_k());
    grow(weights_, pairs * sizeof(float), stream);
    grow(ids_, pairs * sizeof(int32_t), stream);
  }

 private:
  void grow(DeviceBuffer& b, size_t bytes, void* stream) {
    if (b.bytes() >= bytes) return;
    DeviceScope scope(device_);
    cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
    QMOE_CUDA_CHECK(cudaStreamIsCapturing(static_cast<cudaStream_t>(stream), &capturing));
    check(capturing == cudaStreamCaptureStatusNone,
          "ShardedMoE (rank {}): a forward needs {} bytes of scratch while its stream captures a "
          "CUDA graph; call reserve() with the largest batch before capturing",
          shard_.rank, bytes);
    b = DeviceBuffer(bytes);
  }

  MoEConfig config_;
  RankShard shard_;
  int device_;
  DeviceBuffer bias_, weights_, ids_;
  std::unique_ptr<RoutingReport> report_;
  RoutingParams params_;
  std::array<DeviceBuffer, kSlots> slots_;
};

}  // namespace

std::unique_ptr<RankScratch> cuda_rank_scratch(const MoEConfig& config, const ShardPlan& plan,
                                               int rank, int device) {
  return std::make_unique<CudaRankScratch>(config, plan, rank, device);
}

}  // namespace qmoe
