#pragma once
// What every CUDA backend shares around its kernels: prepare() on the right device, top-k routing
// on the device into the stream's workspace, then the backend's run() on the routed batch, and
// the checks of a routed batch. A CUDA backend derives from CudaBackend<its prepared layer>.
#include <cuda_runtime_api.h>

#include <memory>
#include <string_view>

#include "backend/backend.hpp"
#include "core/check.hpp"
#include "cuda/device_buffer.hpp"
#include "cuda/device_scope.hpp"
#include "cuda/routing_report.hpp"

namespace qmoe {

struct RoutingScratch {
  float* topk_weights = nullptr;        // [M, k] on the device
  int32_t* topk_ids = nullptr;          // [M, k]
  unsigned long long* fault = nullptr;  // the layer's RoutingReport::device_word()
};

// What run() of every CUDA backend checks of a routed batch: first the layer's routing report
// (bad routing of an earlier forward that the kernels reported: an Error now), then every tensor
// on cuda:`device` and contiguous, out in hidden's dtype, topk_ids with `top_k` columns. Without
// the checking mode (QMOE_CHECK_ROUTING=1) ids outside 0..E-1 are skipped by the alignment (the
// slot adds nothing) and reported, and repeated ids are computed twice; the checking mode reads
// ids and weights back (a host sync) and makes them the host backends' errors at once. Each
// backend checks hidden's dtype itself.
void check_routed_batch(std::string_view backend, const RoutedBatch& batch, int device, int top_k,
                        int64_t num_experts, const RoutingReport& report);

// correction_bias: the config's routing bias on the device (empty when there is none).
void route_then_run(const Backend& backend, const PreparedExperts& prepared,
                    const MoEConfig& config, const DeviceBuffer& correction_bias, int device,
                    TensorView hidden, TensorView router_logits, TensorView out,
                    RoutingScratch scratch, cudaStream_t stream);

// The checks of a layer's config every CUDA backend makes in prepare(): the router weight on the
// input only with top-k 1, activations (when the config names them) in bf16 or f16.
void check_cuda_layer_config(std::string_view backend, const MoEConfig& config);

// prepare(), forward() and reserve() of a CUDA backend, the same for all: Experts is its prepared
// layer, built from (experts, host layout, config, device index), holding `device`,
// `correction_bias`, `routing_report` and `workspace(stream, tokens)` (the stream's shared
// workspace, grown to hold `tokens`). Experts::HostLayout, built from (experts, config), is the
// host half of prepare: every check and conversion made before the upload. The backend adds name()
// and run().
template <class Experts>
class CudaBackend : public Backend {
 public:
  std::unique_ptr<PreparedExperts> prepare(const QuantizedExperts& experts, const MoEConfig& config,
                                           Device device) const override {
    return prepare_layer(experts, config, device);
  }

  void prepare_on_host(const QuantizedExperts& experts, const MoEConfig& config) const override {
    check_experts_match_config(config, experts);
    check_cuda_layer_config(name(), config);
    const typename Experts::HostLayout host(experts, config);
  }

  void forward(const PreparedExperts& prepared, const MoEConfig& config, TensorView hidden,
               TensorView router_logits, TensorView out, void* stream) const override {
    const auto& p = static_cast<const Experts&>(prepared);
    DeviceScope scope(p.device);
    const auto s = static_cast<cudaStream_t>(stream);
    const auto& ws = p.workspace(s, hidden.dim(0));
    route_then_run(*this, prepared, config, p.correction_bias, p.device, hidden, router_logits, out,
                   {ws.topk_weights.template as<float>(), ws.topk_ids.template as<int32_t>(),
                    p.routing_report.device_word()},
                   s);
  }

  void reserve(const PreparedExperts& prepared, int64_t max_tokens, void* stream) const override {
    const auto& p = static_cast<const Experts&>(prepared);
    DeviceScope scope(p.device);
    p.workspace(static_cast<cudaStream_t>(stream), max_tokens);
  }

 protected:
  // prepare(), with `extra` handed to the host layout and the prepared layer after the config
  // (e.g. a partner's shared codes, Backend::prepare_beside).
  template <class... Extra>
  std::unique_ptr<PreparedExperts> prepare_layer(const QuantizedExperts& experts,
                                                 const MoEConfig& config, Device device,
                                                 const Extra&... extra) const {
    check(device.kind == DeviceKind::cuda, "backend '{}' runs on a CUDA device, not on {}", name(),
          to_string(device));
    check_experts_match_config(config, experts);
    check_cuda_layer_config(name(), config);
    const typename Experts::HostLayout host(experts, config, extra...);
    DeviceScope scope(device.index);
    return std::make_unique<Experts>(experts, host, config, device.index, extra...);
  }
};

}  // namespace qmoe
