#pragma once
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "oracle/descriptor.hpp"

namespace qmoe {

// The names of the backends whose kernels are compiled into this build. Declared here and defined
// by the backend registry (src/backend/registry.cpp), the one place that knows, so that the
// oracle, which the backends' descriptors build on, includes nothing of theirs.
const std::vector<std::string_view>& built_backend_names();

// Why this build cannot run `backend` on `device` although the layer would suit it: the kernel
// is not among built_backend_names(), or, for CUDA, there is no machine code for the
// device's architecture. nullopt when the build is fine.
std::optional<std::string> build_gap(const BackendDescriptor& backend, const DeviceDesc& device);

// Same question against an explicit CMAKE_CUDA_ARCHITECTURES list ("80-real,90a-real"); an
// empty or symbolic list ("native", "all") is trusted.
std::optional<std::string> missing_cuda_code(std::string_view architectures,
                                             int compute_capability);

}  // namespace qmoe
