#pragma once
// The truth of every backend test: a float64 forward of a whole MoE layer written from the
// definitions (the canonical representation in qmoe/quant.hpp, docs/architecture.md), sharing no
// code with what it checks: its own decode of codes/scales/zeros/g_idx (not
// QuantizedWeight::dequant), its own routing (not route_topk), its own activations (not
// src/act) and its own MXFP4 quantizer of W4A4 GEMM inputs (not src/quant). Slow and plain on
// purpose.
#include <cstdint>
#include <vector>

#include "qmoe/config.hpp"
#include "qmoe/quant.hpp"
#include "qmoe/tensor.hpp"

namespace qmoe::sample {

// Value of weight element (e, n, k) decoded straight from the canonical buffers, in float64.
double reference_weight(const QuantizedWeight& w, int64_t e, int64_t n, int64_t k);

struct ReferenceRouting {
  int top_k = 0;
  std::vector<int32_t> ids;     // [M, k], slots by descending selection score, lower id on ties
  std::vector<double> weights;  // [M, k]
};

// logits f32 [M, E]: scores (softmax/sigmoid) in float64, correction bias for selection only,
// grouped top-k masking, k rounds of arg-max, optional renormalization, then the scaling factor.
ReferenceRouting reference_route(const RoutingConfig& config, const float* logits, int64_t M,
                                 int64_t E);

// f64 [M, H]: sum over each token's slots of weight * (W2 act(W13 x + b13) + b2), hidden of any
// float dtype; with W4A4 schemes x and act(...) are first quantized to MXFP4 and back. An id
// outside 0..E-1 throws: the reference has no answer for it.
Buffer reference_forward(const MoEConfig& config, const QuantizedExperts& experts,
                         const Buffer& hidden, const ReferenceRouting& routing);

}  // namespace qmoe::sample
