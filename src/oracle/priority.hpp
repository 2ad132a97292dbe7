#pragma once
#include <vector>

#include "oracle/descriptor.hpp"

namespace qmoe {

// Every descriptor, the given platform's priority order first, then the other platforms'.
std::vector<const BackendDescriptor*> descriptors_for(DeviceKind platform);

}  // namespace qmoe
