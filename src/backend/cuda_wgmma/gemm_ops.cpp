#include "backend/cuda_wgmma/grouped_gemm.hpp"

namespace qmoe::cuda_wgmma {

// Defined by the generated instance files (CMakeLists.txt): bits, dtype, token tile.
const GemmOps& gemm_ops_int4_bf16_t256();
const GemmOps& gemm_ops_int4_f16_t256();
const GemmOps& gemm_ops_int8_bf16_t256();
const GemmOps& gemm_ops_int8_f16_t256();
const GemmOps& gemm_ops_int4_bf16_t128();
const GemmOps& gemm_ops_int4_f16_t128();
const GemmOps& gemm_ops_int8_bf16_t128();
const GemmOps& gemm_ops_int8_f16_t128();

const GemmOps* gemm_ops(const Variant& v, int tile_tokens) {
  const bool bf16 = v.act == DType::bf16, full = tile_tokens == kFullTileTokens;
  if ((!bf16 && v.act != DType::f16) || (!full && tile_tokens != kTailTileTokens)) return nullptr;
  if (v.bits == 4) {
    if (bf16) return full ? &gemm_ops_int4_bf16_t256() : &gemm_ops_int4_bf16_t128();
    return full ? &gemm_ops_int4_f16_t256() : &gemm_ops_int4_f16_t128();
  }
  if (v.bits == 8) {
    if (bf16) return full ? &gemm_ops_int8_bf16_t256() : &gemm_ops_int8_bf16_t128();
    return full ? &gemm_ops_int8_f16_t256() : &gemm_ops_int8_f16_t128();
  }
  return nullptr;
}

}  // namespace qmoe::cuda_wgmma
