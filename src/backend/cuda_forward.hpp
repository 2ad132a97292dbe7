#pragma once
// The forward both CUDA backends share: top-k routing on the device into the stream's workspace,
// then the backend's run() on the routed batch.
#include <cuda_runtime_api.h>

#include <string_view>

#include "backend/backend.hpp"
#include "cuda/device_buffer.hpp"

namespace qmoe {

struct RoutingScratch {
  float* topk_weights = nullptr;  // [M, k] on the device
  int32_t* topk_ids = nullptr;    // [M, k]
};

// What run() of both CUDA backends checks of a routed batch: every tensor on cuda:`device` and
// contiguous, out in hidden's dtype, topk_ids with `top_k` columns. Without the checking mode
// (QMOE_CHECK_ROUTING=1) ids outside 0..E-1 are skipped by the alignment (the slot adds nothing)
// and repeated ids are computed twice; the checking mode reads ids and weights back (a host sync)
// and makes them the host backends' errors. Each backend checks hidden's dtype itself.
void check_routed_batch(std::string_view backend, const RoutedBatch& batch, int device, int top_k,
                        int64_t num_experts);

// correction_bias: the config's routing bias on the device (empty when there is none).
void route_then_run(const Backend& backend, const PreparedExperts& prepared,
                    const MoEConfig& config, const DeviceBuffer& correction_bias, int device,
                    TensorView hidden, TensorView router_logits, TensorView out,
                    RoutingScratch scratch, cudaStream_t stream);

}  // namespace qmoe
