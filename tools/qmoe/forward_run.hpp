#pragma once
// What `demo`, `run`, `verify` and `bench` share: the devices of this machine, the activation
// dtype and error bound for a device, and timed forwards of a MoE on host-side inputs.
#include <string>
#include <vector>

#include "qmoe/device.hpp"
#include "qmoe/moe.hpp"
#include "qmoe/tensor.hpp"

namespace qmoe::cli {

// --device of a command that runs something: "auto" (the first CUDA device when there is one,
// else the host CPU), cpu, cuda, cuda:N. A described device (h100, sm_90) is a usage error.
Device machine_device(const std::string& flag);
// The host CPU, then every CUDA device of this machine.
std::vector<DeviceDesc> machine_devices();

// "auto": f32 on the CPU, bf16 on a GPU (tensor-core backends take 16-bit activations).
DType activation_dtype(const std::string& flag, Device device);

// Output rounding alone costs ~2^-9 (bf16) / 2^-12 (f16) relative per element; backends may also
// round intermediates to 16 bits. The bounds leave room for that and nothing more.
double error_bound(DType t);

struct TimedForward {
  std::vector<double> seconds;  // one per forward, in run order
  double median() const;
};

// Runs `repeats` forwards of `moe` on `device` (inputs copied there once) and leaves the last
// output in `out` (host, [M, H] of hidden's dtype).
TimedForward run_forwards(const MoE& moe, const Buffer& hidden, const Buffer& router_logits,
                          Buffer& out, Device device, int repeats);

}  // namespace qmoe::cli
