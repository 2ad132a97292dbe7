#pragma once
// Bad routing on a CUDA device is never silent, and costs no host sync: the alignment kernel
// reports an expert id outside 0..E-1 and the routing kernel a non-finite weight into one word of
// pinned host memory mapped into the device (routing_fault.cuh), and the host reads that word at
// the next forward of the layer, after the engine has synchronised in between, and throws.
#include <cstdint>
#include <string_view>

namespace qmoe {

// batched_count: MoE::forward_batched's counts[e] outside 0..T_max (the pair field holds e).
enum class RoutingFault : uint64_t { none = 0, expert_id = 1, weight = 2, batched_count = 3 };

// One layer's report word, allocated on the current device's context.
class RoutingReport {
 public:
  RoutingReport();
  ~RoutingReport();
  RoutingReport(const RoutingReport&) = delete;
  RoutingReport& operator=(const RoutingReport&) = delete;

  // Where kernels store (AlignOutputs::fault, RoutingParams::fault).
  unsigned long long* device_word() const { return device_; }

  // When a kernel of an earlier forward has stored a report: clears it and throws qmoe::Error
  // naming `backend`, the token, slot and id or weight, as the host backends' checks do.
  void throw_if_reported(std::string_view backend, int top_k, int64_t num_experts) const;

 private:
  volatile unsigned long long* host_ = nullptr;
  unsigned long long* device_ = nullptr;
};

}  // namespace qmoe
