#pragma once
#include "backend/backend.hpp"

namespace qmoe {

// `cuda-mma`: every integer WNA16 scheme on tensor cores (mma.sync), sm_80 and newer. prepare
// repacks the canonical weights once (layout.hpp); a forward is route -> align -> GEMM1 (the
// activation in its epilogue) -> GEMM2 -> combine on the caller's stream, with no allocation and
// no host synchronisation once that stream's workspace holds the batch (graph-capturable after
// MoE::reserve). Scratch memory is one workspace per device and stream, shared by every cuda-mma
// layer (workspace_pool.hpp), so forwards on different streams or host threads may run
// concurrently. A captured graph keeps using the workspace of the stream it was captured on: its
// replays must not overlap each other or forwards on that stream (their scratch would mix, and the
// GEMMs' tail split flags could leave one launch waiting forever).
const Backend& cuda_mma_backend();

}  // namespace qmoe
