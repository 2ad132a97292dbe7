#pragma once
#include "backend/backend.hpp"

namespace qmoe {

// `cuda-wgmma`: the Hopper (sm_90a) prefill backend. prepare converts the canonical weights once
// into CUTLASS's mixed-input layout (kernel_weight.hpp) for one activation dtype
// (MoEConfig::activation_dtype, bf16 when unset). A forward is route -> align by expert (one-row
// tiles) -> gather token rows -> grouped GEMM1 -> activation -> grouped GEMM2 -> weighted sum, on
// the caller's stream, with no host sync; scratch comes from the same per-device, per-stream
// workspaces as cuda-mma's (so MoE::reserve and graph capture behave the same).
const Backend& cuda_wgmma_backend();

}  // namespace qmoe
