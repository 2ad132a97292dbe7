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

// Whether launches on the current device may be programmatic dependents
// (cuda/dependent_launch.cuh): compute capability 9.0+, in a build that embeds no PTX for older
// architectures (cmake/cuda.cmake). Asked at every launch: two runtime queries (the device, one
// attribute of it), not the full property struct current_cuda_device() reads.
bool current_device_launches_dependents();

}  // namespace qmoe
