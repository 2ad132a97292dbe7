#pragma once
// What a device can do, as far as choosing a backend is concerned: CPU instruction-set features,
// or a CUDA device's compute capability. Devices are queried (the host CPU, the CUDA devices of
// this machine) or described by hand ("sm_90", "h100", "cpu:avx2,fma") so that the oracle's
// choice can be asked for any machine from any machine.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "qmoe/tensor.hpp"

namespace qmoe {

enum class CpuFeature : uint8_t { x86_64, avx2, fma, avx512f, avx512bw, avx512vnni, avx512bf16 };
std::string_view name(CpuFeature f);  // "x86-64", "avx2", "fma", "avx512f", ...

struct DeviceDesc {
  DeviceKind kind = DeviceKind::cpu;
  int index = 0;
  std::string name;        // "host CPU", "NVIDIA H100 80GB HBM3", "h100 (described)"
  bool described = false;  // given by hand rather than queried from this machine
  // kind == cpu
  std::vector<CpuFeature> cpu_features;
  // kind == cuda: compute capability as major * 10 + minor (80 = sm_80, 90 = sm_90/sm_90a)
  int compute_capability = 0;
  int multiprocessors = 0;  // 0 when unknown

  Device device() const { return Device{kind, index}; }
  bool has(CpuFeature f) const;
  // name plus the facts that matter: "h100 (described; sm_90, 132 SMs)"
  std::string to_string() const;
};

// The CPU this process runs on, with the features it really has.
DeviceDesc host_cpu();
// Every CUDA device visible to this process; empty when qmoe is built without CUDA, when there
// is no driver or no GPU. Never throws for a missing GPU.
std::vector<DeviceDesc> cuda_devices();
// The real device behind a Device (the host CPU, or CUDA device `index`). Throws Error naming the
// devices that exist when there is no such CUDA device.
DeviceDesc query_device(Device device);

// "cpu" (this host), "cuda" / "cuda:N" (a real CUDA device of this machine), "sm_80", "sm_86",
// "sm_90", "sm_90a", ..., "a100", "h100", "h200", ..., or a hand-written CPU:
// "cpu:x86-64,avx2,fma" ("cpu:" alone or "cpu:generic" is a CPU without x86-64 features).
// Throws Error listing the accepted forms.
DeviceDesc parse_device(std::string_view text);

}  // namespace qmoe
