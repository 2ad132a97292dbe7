// THE priority table, and the list of every backend the oracle knows. Adding a backend: write
// its descriptor (src/backend/<folder>/descriptor.cpp, declared in oracle/descriptor.hpp) and add
// it to its platform's row here.
#include "oracle/priority.hpp"

#include <array>

namespace qmoe {

namespace {

using DescriptorOf = const BackendDescriptor& (*)();

struct PlatformPriority {
  DeviceKind platform;
  std::vector<DescriptorOf> best_first;  // opt-in-only backends are skipped by "auto"
};

// cuda-mma before cuda-wgmma: the mma kernel serves every token count; wgmma is the prefill kernel
// that the CUDA backends switch to per call above a measured token count (DESIGN.md), so it is
// chosen for a whole layer only where cuda-mma cannot run it.
const std::array<PlatformPriority, 2>& priority_table() {
  static const std::array<PlatformPriority, 2> table{{
      {DeviceKind::cpu, {cpu_descriptor, emulation_descriptor}},
      {DeviceKind::cuda, {cuda_mma_descriptor, cuda_wgmma_descriptor}},
  }};
  return table;
}

}  // namespace

std::vector<const BackendDescriptor*> descriptors_for(DeviceKind platform) {
  std::vector<const BackendDescriptor*> order;
  for (const PlatformPriority& row : priority_table())
    if (row.platform == platform)
      for (DescriptorOf d : row.best_first) order.push_back(&d());
  for (const PlatformPriority& row : priority_table())
    if (row.platform != platform)
      for (DescriptorOf d : row.best_first) order.push_back(&d());
  return order;
}

const std::vector<const BackendDescriptor*>& all_descriptors() {
  static const std::vector<const BackendDescriptor*> all = descriptors_for(DeviceKind::cpu);
  return all;
}

}  // namespace qmoe
