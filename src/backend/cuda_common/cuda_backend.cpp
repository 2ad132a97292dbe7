#include "backend/cuda_common/cuda_backend.hpp"

#include <utility>

#include "cuda/device_scope.hpp"
#include "cuda/routing.hpp"
#include "route/routing_contract.hpp"

namespace qmoe {

void check_cuda_layer_config(std::string_view backend, const MoEConfig& config) {
  check(!config.apply_router_weight_on_input || config.top_k() == 1,
        "{}: apply_router_weight_on_input needs top_k 1, got {}", backend, config.top_k());
  const DType act = config.activation_dtype.value_or(DType::bf16);
  check(act == DType::bf16 || act == DType::f16, "{}: activations must be bf16 or f16, got {}",
        backend, name(act));
}

void check_routed_batch(std::string_view backend, const RoutedBatch& batch, int device, int top_k,
                        int64_t num_experts, const RoutingReport& report) {
  report.throw_if_reported(backend, top_k, num_experts);
  for (auto [t, what] : {std::pair{&batch.hidden, "hidden"},
                         {&batch.out, "out"},
                         {&batch.topk_weights, "topk_weights"},
                         {&batch.topk_ids, "topk_ids"}})
    check_on_device(backend, *t, what, device);
  const DType dtype = batch.hidden.dtype();
  check(batch.out.dtype() == dtype, "{}: out must be {} like hidden, got {}", backend, name(dtype),
        name(batch.out.dtype()));
  check(batch.topk_ids.dim(1) == top_k, "{}: prepared for top-{}, got topk_ids {}", backend, top_k,
        batch.topk_ids.describe());
  if (routing_checks_on()) {
    const auto stream = static_cast<cudaStream_t>(batch.stream);
    check_routed_input(on_host<int32_t>(batch.topk_ids, stream).data(),
                       on_host<float>(batch.topk_weights, stream).data(), batch.hidden.dim(0),
                       top_k, num_experts, /*not_here_ok=*/true);
  }
}

void route_then_run(const Backend& backend, const PreparedExperts& prepared,
                    const MoEConfig& config, const DeviceBuffer& correction_bias, int device,
                    TensorView hidden, TensorView router_logits, TensorView out,
                    RoutingScratch scratch, cudaStream_t stream) {
  check_on_device(backend.name(), router_logits, "router_logits", device);
  const int64_t M = hidden.dim(0), k = config.top_k();
  if (routing_checks_on())
    check_router_logits(on_host<float>(router_logits, stream).data(), M, config.num_experts);
  RoutingParams params = routing_params(
      config.routing, correction_bias.empty() ? nullptr : correction_bias.as<float>());
  params.fault = scratch.fault;
  validate_routing(params, config.num_experts);
  QMOE_CUDA_CHECK(route_topk_cuda(
      params, router_logits.data_as<const float>(), router_logits.stride(0), router_logits.dim(0),
      router_logits.dim(1), scratch.topk_weights, scratch.topk_ids, stream));
  TensorView weights(scratch.topk_weights, DType::f32, {M, k}, hidden.device());
  TensorView ids(scratch.topk_ids, DType::i32, {M, k}, hidden.device());
  backend.run(prepared, config, RoutedBatch{hidden, weights, ids, out, stream});
}

}  // namespace qmoe
