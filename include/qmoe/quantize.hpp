#pragma once
// Reference round-to-nearest quantizer: float expert weights -> canonical QuantizedWeight.
// Used by `qmoe demo` and by tests to make data; not a calibration-aware quantizer (no GPTQ).
#include <cstdint>
#include <span>

#include "qmoe/quant.hpp"

namespace qmoe {

// weights: f32 [E, N, K]. bias: empty or f32 [E, N].
// act_order_perm: with scheme.act_order, i32 [E, K]: for each expert a permutation of 0..K-1;
// channel perm[j] joins group j / G (GPTQ desc_act order). Must be empty otherwise.
// Symmetric: scale = max|w| / (2^(b-1) - 1), code = round(w / scale) + 2^(b-1).
// Asymmetric: scale = (max - min) / (2^b - 1), zero = round(-min / scale), code = round(w/s) + z.
// MXFP4: scale = 2^ceil(log2(max|w| / 6)), code = nearest e2m1.
// A group whose values are all zero gets scale 1 and codes equal to its zero point.
QuantizedWeight quantize_rtn(std::span<const float> weights, int64_t E, int64_t N, int64_t K,
                             const QuantScheme& scheme, std::span<const float> bias = {},
                             std::span<const int32_t> act_order_perm = {});

}  // namespace qmoe
