#include "cuda/device.hpp"

#include <cuda_runtime_api.h>

#include "core/check.hpp"
#include "cuda/cuda_check.hpp"

namespace qmoe {

std::string cuda_unavailable_reason() {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    cudaGetLastError();  // reset the last-error state so later calls start clean
    return fmt::format("no usable CUDA device ({}: {})", cudaGetErrorName(status),
                       cudaGetErrorString(status));
  }
  if (count == 0) return "no CUDA device present";
  return {};
}

CudaDeviceInfo current_cuda_device() {
  CudaDeviceInfo info;
  QMOE_CUDA_CHECK(cudaGetDevice(&info.index));
  cudaDeviceProp p{};
  QMOE_CUDA_CHECK(cudaGetDeviceProperties(&p, info.index));
  info.name = p.name;
  info.sm_major = p.major;
  info.sm_minor = p.minor;
  info.sm_count = p.multiProcessorCount;
  info.l2_bytes = p.l2CacheSize;
  info.max_shared_per_block_optin = static_cast<int>(p.sharedMemPerBlockOptin);
  return info;
}

bool current_device_launches_dependents() {
#ifdef QMOE_NO_DEPENDENT_LAUNCH
  return false;  // cmake/cuda.cmake: PTX without the waits may run on this device
#else
  int device = 0, major = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess) {
    cudaGetLastError();  // launch without the attribute; the launch itself reports a real failure
    return false;
  }
  return major >= 9;
#endif
}

}  // namespace qmoe
