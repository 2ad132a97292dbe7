#pragma once
// Numerics before timing: a forward's output against an fp32 reference computed on the same
// quantized weights (dequantized exactly in fp32) for the first few tokens of a routing set.
#include "measure/gpu/workload.hpp"

namespace qmoe::bench {

struct Numerics {
  double rel_err = 0;       // ||out - ref|| / ||ref|| over the checked tokens
  bool all_finite = false;  // every element of out (all M rows) finite: nothing left unwritten
};

// out: device bf16 [M, H], written by the forward into a NaN-poisoned buffer.
Numerics check_against_reference(const Shape& s, const Experts& experts, const RoutingSet& set,
                                 const DeviceBuffer& out, int64_t tokens, cudaStream_t stream);

}  // namespace qmoe::bench
