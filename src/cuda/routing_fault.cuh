#pragma once
// The device side of RoutingReport (routing_report.hpp): a kernel that meets bad routing stores
// one 64-bit word into host-mapped memory. A plain 8-byte store, so of several reports one
// survives whole; the host reads it without a sync once the stream's work has finished.
//   bits 62-63  kind (RoutingFault)
//   bits 32-61  the pair m * k + j (pairs are fewer than 2^30, align_tiling.hpp)
//   bits  0-31  the expert id, or the f32 bits of the weight
#include <cstdint>

#include "cuda/routing_report.hpp"

namespace qmoe::cuda {

__device__ __forceinline__ void report_routing_fault(unsigned long long* word, RoutingFault kind,
                                                     int64_t pair, uint32_t value) {
  if (word == nullptr) return;
  *reinterpret_cast<volatile unsigned long long*>(word) =
      (static_cast<unsigned long long>(kind) << 62) |
      (static_cast<unsigned long long>(pair) << 32) | value;
}

}  // namespace qmoe::cuda
