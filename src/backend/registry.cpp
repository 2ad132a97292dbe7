#include "backend/backend.hpp"
#include "backend/cpu/cpu_backend.hpp"
#include "backend/emulation/emulation.hpp"

namespace qmoe {

// One line per backend compiled into this build.
const std::vector<const Backend*>& built_backends() {
  static const std::vector<const Backend*> backends{
      &emulation_backend(),
      &cpu_backend(),
  };
  return backends;
}

const Backend* find_backend(std::string_view name) {
  for (const Backend* b : built_backends())
    if (b->name() == name) return b;
  return nullptr;
}

}  // namespace qmoe
