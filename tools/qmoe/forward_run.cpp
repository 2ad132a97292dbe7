#include "forward_run.hpp"

#include <algorithm>
#include <chrono>

#include "command.hpp"
#include "placed_tensor.hpp"

namespace qmoe::cli {

Device machine_device(const std::string& flag) {
  if (flag == "auto") {
    const std::vector<DeviceDesc> gpus = cuda_devices();
    return gpus.empty() ? Device{} : gpus.front().device();
  }
  const DeviceDesc d = parse_flag([&] { return parse_device(flag); });
  if (d.described)
    usage_error("--device must be a device of this machine (cpu, cuda, cuda:N), not '{}'", flag);
  return d.device();
}

std::vector<DeviceDesc> machine_devices() {
  std::vector<DeviceDesc> all{host_cpu()};
  for (const DeviceDesc& gpu : cuda_devices()) all.push_back(gpu);
  return all;
}

DType activation_dtype(const std::string& flag, Device device) {
  if (flag == "auto") return device.kind == DeviceKind::cpu ? DType::f32 : DType::bf16;
  if (flag == "f32") return DType::f32;
  if (flag == "bf16") return DType::bf16;
  if (flag == "f16") return DType::f16;
  usage_error("--dtype must be auto, f32, bf16 or f16, got '{}'", flag);
}

double error_bound(DType t) { return t == DType::f32 ? 5e-3 : 1.5e-2; }

double TimedForward::median() const {
  std::vector<double> sorted = seconds;
  std::sort(sorted.begin(), sorted.end());
  return sorted.empty() ? 0.0 : sorted[sorted.size() / 2];
}

TimedForward run_forwards(const MoE& moe, const Buffer& hidden, const Buffer& router_logits,
                          Buffer& out, Device device, int repeats) {
  const PlacedTensor hidden_on(hidden, device), logits_on(router_logits, device);
  const PlacedTensor out_on(out, device);
  TimedForward t;
  for (int r = 0; r < repeats; ++r) {
    const auto start = std::chrono::steady_clock::now();
    moe.forward(hidden_on.view(), logits_on.view(), out_on.view());
    synchronize(device);
    t.seconds.push_back(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  out_on.copy_to(out);
  return t;
}

}  // namespace qmoe::cli
