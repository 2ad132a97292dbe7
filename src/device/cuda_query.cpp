// CUDA devices through the runtime API (CUDA builds only). A machine without a driver or a GPU
// has no CUDA devices; that is an empty list, never an error.
#include <cuda_runtime_api.h>

#include "core/check.hpp"
#include "qmoe/device.hpp"

namespace qmoe {

std::vector<DeviceDesc> cuda_devices() {
  int count = 0;
  const cudaError_t counted = cudaGetDeviceCount(&count);
  if (counted != cudaSuccess) {
    // No driver / no device: clear the sticky "last error" so later CUDA calls start clean.
    (void)cudaGetLastError();
    return {};
  }
  std::vector<DeviceDesc> devices;
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp prop{};
    const cudaError_t got = cudaGetDeviceProperties(&prop, i);
    check(got == cudaSuccess, "cudaGetDeviceProperties({}) failed: {}", i, cudaGetErrorString(got));
    DeviceDesc d;
    d.kind = DeviceKind::cuda;
    d.index = i;
    d.name = prop.name;
    d.compute_capability = prop.major * 10 + prop.minor;
    d.multiprocessors = prop.multiProcessorCount;
    devices.push_back(std::move(d));
  }
  return devices;
}

}  // namespace qmoe
