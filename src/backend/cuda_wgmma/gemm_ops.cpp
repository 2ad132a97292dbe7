#include "backend/cuda_wgmma/grouped_gemm.hpp"

namespace qmoe::cuda_wgmma {

// Defined by the generated instance files (CMakeLists.txt).
const GemmOps& gemm_ops_int4_bf16();
const GemmOps& gemm_ops_int4_f16();
const GemmOps& gemm_ops_int8_bf16();
const GemmOps& gemm_ops_int8_f16();

const GemmOps* gemm_ops(const Variant& v) {
  const bool bf16 = v.act == DType::bf16;
  if (!bf16 && v.act != DType::f16) return nullptr;
  if (v.bits == 4) return bf16 ? &gemm_ops_int4_bf16() : &gemm_ops_int4_f16();
  if (v.bits == 8) return bf16 ? &gemm_ops_int8_bf16() : &gemm_ops_int8_f16();
  return nullptr;
}

}  // namespace qmoe::cuda_wgmma
