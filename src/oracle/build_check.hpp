#pragma once
#include <optional>
#include <string>

#include "oracle/descriptor.hpp"

namespace qmoe {

// Why this build cannot run `backend` on `device` although the layer would suit it: the kernel
// is not registered (src/backend/registry.cpp), or, for CUDA, there is no machine code for the
// device's architecture. nullopt when the build is fine.
std::optional<std::string> build_gap(const BackendDescriptor& backend, const DeviceDesc& device);

// Same question against an explicit CMAKE_CUDA_ARCHITECTURES list ("80-real,90a-real"); an
// empty or symbolic list ("native", "all") is trusted.
std::optional<std::string> missing_cuda_code(std::string_view architectures,
                                             int compute_capability);

}  // namespace qmoe
