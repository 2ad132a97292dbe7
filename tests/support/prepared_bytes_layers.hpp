#pragma once
// Layers on which a backend's descriptor formula for its prepared bytes (PreparedBytes) is
// checked against what its prepare really allocates: rows and K off the tiles, int4 and int8,
// zero points, act-order, biases, MXFP4, gated and not.
#include <vector>

#include "support/moe_case.hpp"

namespace qmoe::test {

inline std::vector<CaseSpec> prepared_bytes_layers() {
  const QuantScheme mxfp4{.kind = WeightKind::mxfp4, .bits = 4, .group_size = 32};
  return {
      {.E = 3, .H = 200, .I = 40, .M = 1, .scheme = scheme(4, kChannelwise)},
      {.E = 2, .H = 96, .I = 160, .M = 1, .scheme = scheme(8, 32, true), .bias = true},
      {.E = 2,
       .H = 128,
       .I = 96,
       .M = 1,
       .scheme = scheme(4, 32, true, true),
       .activation = Activation::gelu_no_mul,
       .bias = true},
      {.E = 2,
       .H = 96,
       .I = 160,
       .M = 1,
       .scheme = mxfp4,
       .activation = Activation::swigluoai,
       .bias = true},
  };
}

}  // namespace qmoe::test
