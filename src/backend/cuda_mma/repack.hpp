#pragma once
// Canonical QuantizedWeight -> the cuda-mma layout (layout.hpp), on the host, once per weight.
#include <cstdint>
#include <span>
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

// Throws qmoe::Error (naming `what`, e.g. "w13") for what the layout cannot hold: group sizes
// that are neither channelwise nor a multiple of 32.
// row_source: the weight row behind each packed row (-1: a zero row), e.g. to pair gate and up
// rows inside one strip (gated_row_order); empty: packed row n is row n.
PackedWeight pack_weight(const QuantizedWeight& w, const std::string& what,
                         std::span<const int64_t> row_source = {});

// The w13 row order under which GEMM1's epilogue can apply a gated activation itself: strip s
// holds gate rows 8s .. 8s + 7 as its rows 0-7 and the matching up rows as rows 8-15, so one
// lane holds both halves of its outputs (layout.hpp: rows g and g + 8). I rows of each half,
// interleaved (gate j = row 2j, up j = row 2j + 1) or in halves (gate j = row j, up j = I + j).
std::vector<int64_t> gated_row_order(int64_t I, bool interleaved);

}  // namespace qmoe::cuda_mma
