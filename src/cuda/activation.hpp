#pragma once
// Activations on the GPU: GEMM1 output [rows, 2I] (gated) or [rows, I] (*_no_mul) -> [rows, I],
// bf16 or f16 in and out, fp32 math with one rounding at the end (the CPU reference,
// src/act/activation.hpp, defines each formula). Graph-capturable, no workspace.
#include <cuda_runtime_api.h>

#include <cstdint>

#include "qmoe/config.hpp"
#include "qmoe/dtype.hpp"

namespace qmoe {

// in row r starts at in + r * in_row_stride, out row r at out + r * out_row_stride (elements).
// rows_limit_dev: optional device i32 scalar; when given only rows < min(rows, *rows_limit_dev)
// are computed (e.g. the padded total of the alignment, while `rows` is its upper bound), so the
// launch shape stays fixed under graph capture. dtype: bf16 or f16 (else cudaErrorInvalidValue).
cudaError_t activation_cuda(Activation activation, const ActivationParams& params, DType dtype,
                            const void* in, int64_t in_row_stride, void* out,
                            int64_t out_row_stride, int64_t rows, int64_t I,
                            const int32_t* rows_limit_dev, cudaStream_t stream);

}  // namespace qmoe
