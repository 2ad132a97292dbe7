#pragma once
#include "backend/backend.hpp"

namespace qmoe {

// `cuda-mma`: every integer WNA16 scheme on tensor cores (mma.sync), sm_80 and newer. prepare
// repacks the canonical weights once (layout.hpp); a forward is route -> align -> GEMM1 (the
// activation in its epilogue) -> GEMM2 -> combine on the caller's stream, with no allocation and
// no host synchronisation once that stream's workspace holds the batch (graph-capturable: run
// one forward of the largest M on the stream first, or call reserve_cuda_mma_tokens). Each
// stream has its own workspace, made by its first forward, so forwards on different streams or
// host threads may run concurrently. A captured graph keeps using the workspace of the stream it
// was captured on: its replays must not overlap each other or forwards on that stream (their
// scratch would mix, and the GEMMs' tail split flags could leave one launch waiting forever).
const Backend& cuda_mma_backend();

// Grows the workspace that prepared cuda-mma experts keep for `stream` (a cudaStream_t; nullptr
// is the legacy default stream) to hold batches of up to `max_tokens` tokens, so that later
// forwards on that stream allocate nothing (required before CUDA graph capture on it).
void reserve_cuda_mma_tokens(const PreparedExperts& prepared, int64_t max_tokens, void* stream);

}  // namespace qmoe
