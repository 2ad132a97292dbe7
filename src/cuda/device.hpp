#pragma once
// What the CUDA code needs to know about the device it runs on.
#include <string>

namespace qmoe {

// Empty when a usable CUDA device is present, else why not (no driver, no device, ...), for
// tests that skip and tools that fall back.
std::string cuda_unavailable_reason();

struct CudaDeviceInfo {
  int index = 0;
  std::string name;
  int sm_major = 0, sm_minor = 0;
  int sm_count = 0;
  int l2_bytes = 0;
  int max_shared_per_block_optin = 0;
};

// Properties of the current device. Throws qmoe::Error when there is none.
CudaDeviceInfo current_cuda_device();

// Whether the current device honours programmatic dependent launch (compute capability 9.0+;
// cuda/dependent_launch.cuh). Cheap enough to ask at every launch.
bool current_device_launches_dependents();

}  // namespace qmoe
