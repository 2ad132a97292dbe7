// THE priority table, and so the list of every backend the oracle knows. Adding a backend: write
// its descriptor function in src/backend/<folder>/descriptor.cpp (compiled automatically), declare
// it below and put it in its platform's row.
#include "oracle/priority.hpp"

#include <array>

namespace qmoe {

// Defined next to each backend's code, in src/backend/<folder>/descriptor.cpp.
const BackendDescriptor& emulation_descriptor();
const BackendDescriptor& cpu_descriptor();
const BackendDescriptor& cuda_mma_descriptor();
const BackendDescriptor& cuda_wgmma_descriptor();

namespace {

using DescriptorOf = const BackendDescriptor& (*)();

struct PlatformPriority {
  DeviceKind platform;
  std::vector<DescriptorOf> best_first;  // opt-in-only backends are skipped by "auto"
};

// cuda-mma before cuda-wgmma: the mma kernel serves every token count; wgmma is the prefill kernel
// that the CUDA backends switch to per call above a measured token count (Selection::plan), so it
// is chosen for a whole layer only where cuda-mma cannot run it.
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
