#include <fmt/format.h>

#include <algorithm>

#include "core/check.hpp"
#include "qmoe/device.hpp"

namespace qmoe {

std::string_view name(CpuFeature f) {
  switch (f) {
    case CpuFeature::x86_64: return "x86-64";
    case CpuFeature::avx2: return "avx2";
    case CpuFeature::fma: return "fma";
    case CpuFeature::avx512f: return "avx512f";
    case CpuFeature::avx512bw: return "avx512bw";
    case CpuFeature::avx512vnni: return "avx512vnni";
    case CpuFeature::avx512bf16: return "avx512bf16";
  }
  return "?";
}

bool DeviceDesc::has(CpuFeature f) const {
  return std::find(cpu_features.begin(), cpu_features.end(), f) != cpu_features.end();
}

std::string DeviceDesc::to_string() const {
  const char* origin = described ? "described; " : "";
  if (kind == DeviceKind::cpu) {
    std::string features;
    for (CpuFeature f : cpu_features)
      features += fmt::format("{}{}", features.empty() ? "" : ", ", qmoe::name(f));
    return fmt::format("{} ({}{})", name, origin,
                       features.empty() ? "no x86-64 features" : features);
  }
  std::string text = fmt::format("{} ({}", name, origin);
  if (!described) text += fmt::format("cuda:{}, ", index);
  text += fmt::format("sm_{}", compute_capability);
  if (multiprocessors > 0) text += fmt::format(", {} SMs", multiprocessors);
  return text + ")";
}

DeviceDesc query_device(Device device) {
  if (device.kind == DeviceKind::cpu) return host_cpu();
  std::vector<DeviceDesc> devices = cuda_devices();
  check(device.index >= 0 && device.index < static_cast<int>(devices.size()),
        "there is no CUDA device {} on this machine ({} visible)", device.index, devices.size());
  return devices[static_cast<size_t>(device.index)];
}

}  // namespace qmoe
