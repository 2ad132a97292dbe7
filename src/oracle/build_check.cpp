#include "oracle/build_check.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>

#ifndef QMOE_CUDA_ARCHITECTURES
#define QMOE_CUDA_ARCHITECTURES ""
#endif

namespace qmoe {

namespace {

// One CMAKE_CUDA_ARCHITECTURES entry: "80", "90a-real", "86-virtual".
struct CudaTarget {
  int cc = 0;
  bool arch_specific = false;  // "a" suffix: runs on exactly that compute capability
  bool sass = true;
  bool ptx = true;
};

std::optional<CudaTarget> parse_target(std::string_view entry) {
  CudaTarget t;
  if (entry.ends_with("-real")) {
    t.ptx = false;
    entry.remove_suffix(5);
  } else if (entry.ends_with("-virtual")) {
    t.sass = false;
    entry.remove_suffix(8);
  }
  if (entry.ends_with('a') || entry.ends_with('f')) {
    t.arch_specific = entry.back() == 'a';
    entry.remove_suffix(1);
  }
  const auto [end, ec] = std::from_chars(entry.data(), entry.data() + entry.size(), t.cc);
  if (ec != std::errc{} || end != entry.data() + entry.size()) return std::nullopt;
  return t;
}

// SASS runs on the same major version at an equal or higher minor; arch-specific code only on
// its exact version; PTX is JIT-compiled for any newer device.
bool runs_on(const CudaTarget& t, int cc) {
  if (t.arch_specific) return cc == t.cc;
  if (t.sass && cc / 10 == t.cc / 10 && cc >= t.cc) return true;
  return t.ptx && cc >= t.cc;
}

}  // namespace

std::optional<std::string> missing_cuda_code(std::string_view architectures,
                                             int compute_capability) {
  bool any_known = false;
  std::string_view rest = architectures;
  while (!rest.empty()) {
    const size_t comma = rest.find(',');
    const std::string_view entry = rest.substr(0, comma);
    rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
    const std::optional<CudaTarget> t = parse_target(entry);
    if (!t) return std::nullopt;  // "native", "all": decided by the compiler, trust it
    any_known = true;
    if (runs_on(*t, compute_capability)) return std::nullopt;
  }
  if (!any_known) return std::nullopt;
  return fmt::format(
      "this qmoe has CUDA code for {} only, none that runs on sm_{}; rebuild with "
      "-DCMAKE_CUDA_ARCHITECTURES including {}",
      architectures, compute_capability, compute_capability);
}

std::optional<std::string> build_gap(const BackendDescriptor& backend, const DeviceDesc& device) {
  if (std::ranges::find(built_backend_names(), backend.name) == built_backend_names().end())
    return fmt::format("not built into this qmoe ({})", backend.build_hint);
  if (backend.device == DeviceKind::cuda && device.kind == DeviceKind::cuda)
    return missing_cuda_code(QMOE_CUDA_ARCHITECTURES, device.compute_capability);
  return std::nullopt;
}

}  // namespace qmoe
