#pragma once
// Canonical QuantizedWeight -> the cuda-mma layout (layout.hpp), on the host, once per weight.
#include <cstdint>
#include <string>
#include <vector>

#include "backend/cuda_mma/layout.hpp"
#include "qmoe/quant.hpp"

namespace qmoe::cuda_mma {

struct PackedWeight {
  PackedWeightView shape;  // sizes and flags; the pointers stay null on the host
  std::vector<uint8_t> codes;
  std::vector<uint32_t> scale_pairs;
  std::vector<uint16_t> zero_pairs;  // empty when symmetric
  std::vector<float> bias;           // empty without bias
  std::vector<int32_t> k_source;     // act-order only
  std::vector<int32_t> span_group;   // act-order only
};

// Throws qmoe::Error (naming `what`, e.g. "w13") for what the layout cannot hold: MXFP4, or
// group sizes that are neither channelwise nor a multiple of 32.
PackedWeight pack_weight(const QuantizedWeight& w, const std::string& what);

}  // namespace qmoe::cuda_mma
