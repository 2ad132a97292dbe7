#pragma once
// CPU reference routing: router logits [M, E] -> top-k weights (f32) and expert ids (i32).
// Ties: among equal selection scores the lower expert id wins, and slots are ordered by
// descending selection score, so results are deterministic and comparable across backends.
#include <cstdint>

#include "qmoe/config.hpp"

namespace qmoe {

// logits: f32 [M, E] row-major. topk_weights: f32 [M, k]. topk_ids: i32 [M, k].
// softmax or sigmoid scores; + correction bias for selection only; optional grouped top-k
// (groups scored by max, or by the sum of their top-2 biased scores when a bias is present);
// weights are the unbiased scores, renormalized if asked, then times the routed scaling factor.
void route_topk(const RoutingConfig& config, const float* logits, int64_t M, int64_t E,
                float* topk_weights, int32_t* topk_ids);

}  // namespace qmoe
