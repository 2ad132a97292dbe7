#pragma once
// Top-k routing on the GPU: router logits f32 [M, E] -> topk_weights f32 [M, k], topk_ids i32
// [M, k]. Bit-for-bit the selection of the CPU reference (src/route/topk.hpp): among equal
// selection scores the lower expert id wins and slots are in descending selection score; the
// weights agree within fp32 rounding (the softmax sum is a tree on the GPU, a loop on the CPU).
// One warp per token; no workspace; graph-capturable.
#include <cuda_runtime_api.h>

#include <cstdint>

#include "cuda/limits.hpp"
#include "qmoe/config.hpp"

namespace qmoe {

// The routing config as plain values, with the correction bias already on the device.
struct RoutingParams {
  Scoring scoring = Scoring::softmax;
  int top_k = 2;
  bool renormalize = true;
  float routed_scaling_factor = 1.0f;
  int n_group = 0;                         // 0 = no grouped top-k
  int topk_group = 0;                      // groups kept when n_group > 0
  const float* correction_bias = nullptr;  // device f32 [E], selection only; nullptr = none
  // Where a non-finite weight (from non-finite logits) is reported (RoutingReport::device_word());
  // nullptr: not reported.
  unsigned long long* fault = nullptr;
};

// `bias_dev` must hold config.correction_bias on the device (or be nullptr when it is empty).
RoutingParams routing_params(const RoutingConfig& config, const float* bias_dev);

// Throws qmoe::Error naming the broken rule unless E <= 512, 1 <= top_k <= min(16, E), and a
// grouping (if any) has n_group dividing E and 1 <= topk_group <= n_group.
void validate_routing(const RoutingParams& params, int64_t E);

// logits row m starts at logits + m * logits_row_stride (elements). Outputs are contiguous.
// Returns cudaErrorInvalidValue for parameters validate_routing would reject.
cudaError_t route_topk_cuda(const RoutingParams& params, const float* logits,
                            int64_t logits_row_stride, int64_t M, int64_t E, float* topk_weights,
                            int32_t* topk_ids, cudaStream_t stream);

}  // namespace qmoe
