#pragma once
#include "backend/backend.hpp"

namespace qmoe {

// `cuda-mma`: every integer WNA16 scheme on tensor cores (mma.sync), sm_80 and newer. prepare
// repacks the canonical weights once (layout.hpp) and sizes a workspace; a forward is
// route -> align -> GEMM1 (activation in its epilogue) -> GEMM2 -> combine on the caller's stream,
// with no allocation and no host synchronisation once the workspace holds the batch
// (graph-capturable: run one forward of the largest M first, or call reserve_cuda_mma_tokens).
const Backend& cuda_mma_backend();

// Grows the workspace of prepared cuda-mma experts to hold batches of up to `max_tokens`
// tokens, so that later forwards allocate nothing (required before CUDA graph capture).
void reserve_cuda_mma_tokens(const PreparedExperts& prepared, int64_t max_tokens);

}  // namespace qmoe
