#pragma once
// Weighted sum over top-k on the GPU: out[m, :] = sum_j w[m, j] * in[row(m*k + j), :], fp32
// accumulation in slot order j = 0..k-1, one rounding to bf16/f16. Graph-capturable.
#include <cuda_runtime_api.h>

#include <cstdint>

#include "qmoe/dtype.hpp"

namespace qmoe {

// in: [rows, H] with row stride in_row_stride; out: [M, H] with row stride out_row_stride; both
// bf16 or f16 (the same dtype).
// pair_rows: optional device i32 [M*k]: the row of `in` holding pair m*k + j (e.g.
//   AlignOutputs::pair_rows when GEMM2 wrote in sorted order); -1 = the pair contributes nothing
//   (expert not on this rank) and its row is never read. nullptr: row = pair index.
// topk_weights: optional device f32 [M, k]; nullptr when the weights were already applied.
// Every element of out is written, also rows whose pairs were all dropped (zeros).
cudaError_t combine_topk_cuda(DType dtype, const void* in, int64_t in_row_stride,
                              const int32_t* pair_rows, const float* topk_weights, int64_t M,
                              int64_t k, int64_t H, void* out, int64_t out_row_stride,
                              cudaStream_t stream);

}  // namespace qmoe
