#pragma once
// The reference MoE forward on dequantized weights: plain loops, accumulation in `Acc`
// (float for the emulation backend, double for tests' ground truth).
#include "backend/backend.hpp"

namespace qmoe {

struct DequantizedExperts {
  int64_t E = 0, H = 0, I = 0, w13_rows = 0;
  Buffer w13;  // f32 [E, w13_rows, H]
  Buffer b13;  // f32 [E, w13_rows] or empty
  Buffer w2;   // f32 [E, H, I]
  Buffer b2;   // f32 [E, H] or empty
  // W4A4: the activations entering GEMM1 / GEMM2 are quantized first (the weights' schemes).
  ActivationQuant w13_input = ActivationQuant::none;
  ActivationQuant w2_input = ActivationQuant::none;
};

DequantizedExperts dequantize(const QuantizedExperts& experts);
// One weight as f32 [E, N, K].
Buffer dequantize_weight(const QuantizedWeight& q);

// batch.hidden / batch.out: host f64, f32, f16 or bf16; topk ids outside 0..E-1 are an error.
template <class Acc>
void dense_moe_forward(const DequantizedExperts& w, const MoEConfig& config,
                       const RoutedBatch& batch);

// The batched-experts format (BatchedBatch) in float; host tensors, counts checked.
void dense_batched_forward(const DequantizedExperts& w, const MoEConfig& config,
                           const BatchedBatch& batch);

}  // namespace qmoe
