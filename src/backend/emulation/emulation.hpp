#pragma once
#include "backend/backend.hpp"

namespace qmoe {

// `emulation`: dequantize every expert to float once, then plain loops. The reference every
// other backend is tested against; chosen only when asked for.
const Backend& emulation_backend();

}  // namespace qmoe
