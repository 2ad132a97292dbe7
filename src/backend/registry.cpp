#include "backend/backend.hpp"
#include "backend/cpu/cpu_backend.hpp"
#include "backend/emulation/emulation.hpp"
#include "oracle/build_check.hpp"
#ifdef QMOE_WITH_CUDA
#include "backend/cuda_mma/cuda_mma.hpp"
#endif
#ifdef QMOE_WITH_WGMMA
#include "backend/cuda_wgmma/cuda_wgmma.hpp"
#endif

namespace qmoe {

// One line per backend compiled into this build.
const std::vector<const Backend*>& built_backends() {
  static const std::vector<const Backend*> backends{
      &emulation_backend(),
      &cpu_backend(),
#ifdef QMOE_WITH_CUDA
      &cuda_mma_backend(),
#endif
#ifdef QMOE_WITH_WGMMA
      &cuda_wgmma_backend(),
#endif
  };
  return backends;
}

const std::vector<std::string_view>& built_backend_names() {
  static const std::vector<std::string_view> names = [] {
    std::vector<std::string_view> list;
    for (const Backend* b : built_backends()) list.push_back(b->name());
    return list;
  }();
  return names;
}

const Backend* find_backend(std::string_view name) {
  for (const Backend* b : built_backends())
    if (b->name() == name) return b;
  return nullptr;
}

}  // namespace qmoe
