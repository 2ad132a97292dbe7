// Built without CUDA: this qmoe can see no CUDA device.
#include "qmoe/device.hpp"

namespace qmoe {

std::vector<DeviceDesc> cuda_devices() { return {}; }

}  // namespace qmoe
