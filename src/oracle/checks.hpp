#pragma once
// The checks the oracle runs for one backend, in order; the first that fails is the reason the
// backend is rejected. Every check reads descriptor fields only.
#include <optional>
#include <string>

#include "oracle/descriptor.hpp"
#include "qmoe/oracle.hpp"

namespace qmoe {

// Everything but "is it built into this qmoe", which depends on the build, not on the layer.
std::optional<std::string> first_failed_check(const BackendDescriptor& backend,
                                              const LayerDesc& layer, const DeviceDesc& device);

// Why `backend` cannot take hidden states of `dtype` (the oracle's own check), or nullopt.
std::optional<std::string> unsupported_activation_dtype(const BackendDescriptor& backend,
                                                        DType dtype);

}  // namespace qmoe
