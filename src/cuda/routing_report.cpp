#include "cuda/routing_report.hpp"

#include <cuda_runtime_api.h>

#include <bit>

#include "core/check.hpp"
#include "cuda/cuda_check.hpp"

namespace qmoe {

RoutingReport::RoutingReport() {
  void* host = nullptr;
  QMOE_CUDA_CHECK(cudaHostAlloc(&host, sizeof(unsigned long long), cudaHostAllocMapped));
  host_ = static_cast<volatile unsigned long long*>(host);
  *host_ = 0;
  void* device = nullptr;
  QMOE_CUDA_CHECK(cudaHostGetDevicePointer(&device, host, 0));
  device_ = static_cast<unsigned long long*>(device);
}

RoutingReport::~RoutingReport() { cudaFreeHost(const_cast<unsigned long long*>(host_)); }

void RoutingReport::throw_if_reported(std::string_view backend, int top_k,
                                      int64_t num_experts) const {
  const unsigned long long word = *host_;
  if (word == 0) return;
  *host_ = 0;
  const auto kind = static_cast<RoutingFault>(word >> 62);
  const int64_t pair = static_cast<int64_t>((word >> 32) & ((1ull << 30) - 1));
  const auto value = static_cast<uint32_t>(word);
  if (kind == RoutingFault::batched_count)
    fail(
        "{}: an earlier forward_batched had counts[{}] = {}, which is not a row count of its x "
        "[E, T_max, H] (valid: 0..T_max); that expert ran on its count clamped into that range",
        backend, pair, static_cast<int32_t>(value));
  const int64_t m = pair / top_k, j = pair % top_k;
  if (kind == RoutingFault::expert_id)
    fail(
        "{}: an earlier forward's routing had topk_ids[{}, {}] = {}, which is not an expert id "
        "(valid: 0..{}); that token's output lacks the slot",
        backend, m, j, static_cast<int32_t>(value), num_experts - 1);
  fail(
      "{}: an earlier forward's routing had topk_weights[{}, {}] = {} (valid: a finite weight; "
      "the router logits of that token were not finite); that token's output is not finite",
      backend, m, j, std::bit_cast<float>(value));
}

}  // namespace qmoe
