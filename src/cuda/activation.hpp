#pragma once
// Activations on the GPU: GEMM1 output [rows, 2I] (gated) or [rows, I] (*_no_mul) -> [rows, I],
// bf16 or f16 in and out, fp32 math with one rounding at the end (the CPU reference,
// src/act/activation.hpp, defines each formula). Graph-capturable, no workspace.
#include <cuda_runtime_api.h>

#include <cstdint>

#include "qmoe/config.hpp"
#include "qmoe/dtype.hpp"

namespace qmoe {

// Where the inputs and outputs of a row sit, when not in the activation's own order.
struct ActivationLayout {
  // Gated activations: gate and up columns in strips of 16, gate j at 16 (j / 8) + j % 8 and up j
  // 8 further (the order of cuda-mma's strips, which cuda-wgmma shares); false: the activation's
  // own ([gate; up] halves, swigluoai's interleaved pairs). Needs I a multiple of 8.
  bool gate_up_strips = false;
  // Output channel j at column span_k_column(j) of its 32-channel span (the shared int4 order,
  // cuda/int4_code_order.hpp), the input order of a GEMM on int4 codes. Needs I a multiple of 32.
  bool span_order_out = false;
};

// in row r starts at in + r * in_row_stride, out row r at out + r * out_row_stride (elements).
// rows_limit_dev: optional device i32 scalar; when given only rows < min(rows, *rows_limit_dev)
// are computed (e.g. the padded total of the alignment, while `rows` is its upper bound), so the
// launch shape stays fixed under graph capture. dtype: bf16 or f16 (else cudaErrorInvalidValue,
// as for a layout the sizes do not allow).
cudaError_t activation_cuda(Activation activation, const ActivationParams& params, DType dtype,
                            const void* in, int64_t in_row_stride, void* out,
                            int64_t out_row_stride, int64_t rows, int64_t I,
                            const int32_t* rows_limit_dev, cudaStream_t stream,
                            ActivationLayout layout = {});

}  // namespace qmoe
