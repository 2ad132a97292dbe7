#pragma once
// Small host helpers every CUDA backend's forward uses: the current device for a scope, checks of
// the tensors a forward receives, and device tensors read back in the routing-checking mode.
#include <cuda_runtime_api.h>

#include <string_view>
#include <vector>

#include "core/check.hpp"
#include "cuda/cuda_check.hpp"
#include "qmoe/tensor.hpp"

namespace qmoe {

// Restores the caller's current device on scope exit.
class DeviceScope {
 public:
  explicit DeviceScope(int device) {
    QMOE_CUDA_CHECK(cudaGetDevice(&previous_));
    if (device != previous_) QMOE_CUDA_CHECK(cudaSetDevice(device));
  }
  ~DeviceScope() { cudaSetDevice(previous_); }
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  int previous_ = 0;
};

inline void check_on_device(std::string_view backend, const TensorView& t, const char* what,
                            int device) {
  check(t.device().kind == DeviceKind::cuda && t.device().index == device,
        "{}: {} must be on cuda:{}, got {}", backend, what, device, t.describe());
  check(t.is_contiguous(), "{}: {} must be contiguous, got {}", backend, what, t.describe());
}

// A device tensor's elements on the host, after the stream's earlier work (a host sync: only in
// the routing-checking mode).
template <class T>
std::vector<T> on_host(const TensorView& t, cudaStream_t stream) {
  std::vector<T> host(static_cast<size_t>(t.numel()));
  QMOE_CUDA_CHECK(cudaMemcpyAsync(host.data(), t.data(), host.size() * sizeof(T),
                                  cudaMemcpyDeviceToHost, stream));
  QMOE_CUDA_CHECK(cudaStreamSynchronize(stream));
  return host;
}

}  // namespace qmoe
