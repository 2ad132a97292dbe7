#pragma once
// Selection over an explicit list of descriptors, with the build question passed in, so tests
// can run the oracle on descriptors of their own and on "what if it were built".
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "oracle/descriptor.hpp"
#include "qmoe/oracle.hpp"

namespace qmoe {

using BuildGap =
    std::function<std::optional<std::string>(const BackendDescriptor&, const DeviceDesc&)>;

// `order`: every candidate, the device's platform priority first (as descriptors_for gives).
// evaluate_among reports "nothing can run it" in Selection::error; select_among throws it.
Selection evaluate_among(const std::vector<const BackendDescriptor*>& order, const LayerDesc& layer,
                         const DeviceDesc& device, std::string_view preference,
                         const BuildGap& build_gap);
Selection select_among(const std::vector<const BackendDescriptor*>& order, const LayerDesc& layer,
                       const DeviceDesc& device, std::string_view preference,
                       const BuildGap& build_gap);

}  // namespace qmoe
