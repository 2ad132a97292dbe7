#pragma once
// The forward both CUDA backends share: top-k routing on the device into the stream's workspace,
// then the backend's run() on the routed batch.
#include <cuda_runtime_api.h>

#include "backend/backend.hpp"
#include "cuda/device_buffer.hpp"

namespace qmoe {

struct RoutingScratch {
  float* topk_weights = nullptr;  // [M, k] on the device
  int32_t* topk_ids = nullptr;    // [M, k]
};

// correction_bias: the config's routing bias on the device (empty when there is none).
void route_then_run(const Backend& backend, const PreparedExperts& prepared,
                    const MoEConfig& config, const DeviceBuffer& correction_bias, int device,
                    TensorView hidden, TensorView router_logits, TensorView out,
                    RoutingScratch scratch, cudaStream_t stream);

}  // namespace qmoe
