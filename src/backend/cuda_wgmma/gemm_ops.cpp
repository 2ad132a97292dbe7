#include "backend/cuda_wgmma/grouped_gemm.hpp"

namespace qmoe::cuda_wgmma {

// Defined by the generated instance files (CMakeLists.txt).
const GemmOps& gemm_ops_int4_bf16();
const GemmOps& gemm_ops_int4_bf16_zeros();
const GemmOps& gemm_ops_int4_f16();
const GemmOps& gemm_ops_int4_f16_zeros();
const GemmOps& gemm_ops_int8_bf16();
const GemmOps& gemm_ops_int8_bf16_zeros();
const GemmOps& gemm_ops_int8_f16();
const GemmOps& gemm_ops_int8_f16_zeros();

const GemmOps* gemm_ops(const Variant& v) {
  if (v.act != DType::bf16 && v.act != DType::f16) return nullptr;
  const bool bf16 = v.act == DType::bf16;
  if (v.bits == 4) {
    if (bf16) return v.zeros ? &gemm_ops_int4_bf16_zeros() : &gemm_ops_int4_bf16();
    return v.zeros ? &gemm_ops_int4_f16_zeros() : &gemm_ops_int4_f16();
  }
  if (v.bits == 8) {
    if (bf16) return v.zeros ? &gemm_ops_int8_bf16_zeros() : &gemm_ops_int8_bf16();
    return v.zeros ? &gemm_ops_int8_f16_zeros() : &gemm_ops_int8_f16();
  }
  return nullptr;
}

}  // namespace qmoe::cuda_wgmma
