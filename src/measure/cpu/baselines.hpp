#pragma once
// The baseline the cpu backend is compared with in the same run: OpenBLAS sgemm on weights
// dequantized to f32 beforehand (the emulation backend's copy), per active expert.
#include <string>

#include "backend/emulation/dense_forward.hpp"

namespace qmoe::bench {

// Same contract as Backend::run: gather each expert's tokens (converted to f32), sgemm with
// w13, bias, activation, sgemm with w2, bias, weighted sum, store in the dtype of out.
void openblas_moe_forward(const DequantizedExperts& w, const MoEConfig& config,
                          const RoutedBatch& batch);

// A 1024^3 OpenBLAS sgemm's rate in FLOP/s (best of a few): the compute ceiling of a CPU row.
double openblas_sgemm_flops();

// OpenBLAS's own description of the build and core it runs on ("OpenBLAS 0.3.21 ... Zen ...").
std::string openblas_description();

}  // namespace qmoe::bench
