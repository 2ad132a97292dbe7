#include <utility>

#include "qmoe/device.hpp"

namespace qmoe {

DeviceDesc host_cpu() {
  DeviceDesc d;
  d.kind = DeviceKind::cpu;
  d.name = "host CPU";
#if defined(__x86_64__) || defined(_M_X64)
  d.cpu_features.push_back(CpuFeature::x86_64);
  // __builtin_cpu_supports reads cpuid once (and checks OS support of the AVX state via xgetbv),
  // so a feature listed here is one the kernels may really use.
  __builtin_cpu_init();
  const std::pair<CpuFeature, bool> probed[] = {
      {CpuFeature::avx2, __builtin_cpu_supports("avx2") != 0},
      {CpuFeature::fma, __builtin_cpu_supports("fma") != 0},
      {CpuFeature::avx512f, __builtin_cpu_supports("avx512f") != 0},
      {CpuFeature::avx512bw, __builtin_cpu_supports("avx512bw") != 0},
      {CpuFeature::avx512vnni, __builtin_cpu_supports("avx512vnni") != 0},
      {CpuFeature::avx512bf16, __builtin_cpu_supports("avx512bf16") != 0},
  };
  for (const auto& [feature, present] : probed)
    if (present) d.cpu_features.push_back(feature);
#endif
  return d;
}

}  // namespace qmoe
