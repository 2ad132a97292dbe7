#pragma once
// One expert's linear projection with its codes unpacked: the unit every format adapter reads and
// writes, and the bridge to the canonical stacked QuantizedWeight.
#include <cstdint>
#include <string>
#include <vector>

#include "format/packing.hpp"
#include "qmoe/quant.hpp"

namespace qmoe::format {

struct Projection {
  Matrix<uint8_t> codes;       // [N, K], one unsigned code per byte
  Matrix<float> scales;        // [N, G]
  Matrix<uint8_t> zeros;       // [N, G]; 0 x 0 when the scheme is symmetric
  std::vector<int32_t> g_idx;  // [K]; empty without act-order
  std::vector<float> bias;     // [N]; empty without bias

  int64_t N() const { return codes.rows; }
  int64_t K() const { return codes.cols; }
};

// experts[e] lists the projections whose rows stack into expert e (gate then up for w13, down
// alone for w2). `what` names the result in errors ("layer 3 w13"). The result is not validated
// here; QuantizedExperts does that.
QuantizedWeight stack_projections(const std::vector<std::vector<Projection>>& experts,
                                  const QuantScheme& scheme, const std::string& what);

// Rows [row0, row0 + rows) of expert e of `w`, unpacked (bias and g_idx included when present).
Projection slice_projection(const QuantizedWeight& w, int64_t e, int64_t row0, int64_t rows);

}  // namespace qmoe::format
