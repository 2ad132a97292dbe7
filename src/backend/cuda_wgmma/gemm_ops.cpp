#include "backend/cuda_wgmma/grouped_gemm.hpp"

namespace qmoe::cuda_wgmma {

// Defined by the generated instance files (CMakeLists.txt): code, dtype, token tile.
const GemmOps& gemm_ops_int4_bf16_t256();
const GemmOps& gemm_ops_int4_bf16_t128();
const GemmOps& gemm_ops_int4_bf16_t64();
const GemmOps& gemm_ops_int4_f16_t256();
const GemmOps& gemm_ops_int4_f16_t128();
const GemmOps& gemm_ops_int4_f16_t64();
const GemmOps& gemm_ops_int8_bf16_t256();
const GemmOps& gemm_ops_int8_bf16_t128();
const GemmOps& gemm_ops_int8_bf16_t64();
const GemmOps& gemm_ops_int8_f16_t256();
const GemmOps& gemm_ops_int8_f16_t128();
const GemmOps& gemm_ops_int8_f16_t64();
const GemmOps& gemm_ops_e4m3_bf16_t256();
const GemmOps& gemm_ops_e4m3_bf16_t128();
const GemmOps& gemm_ops_e4m3_bf16_t64();
const GemmOps& gemm_ops_e4m3_f16_t256();
const GemmOps& gemm_ops_e4m3_f16_t128();
const GemmOps& gemm_ops_e4m3_f16_t64();

namespace {

struct Instance {
  Code code;
  DType act;
  int tile_tokens;
  const GemmOps& (*ops)();
};

constexpr Instance kInstances[] = {
    {Code::int4, DType::bf16, 256, gemm_ops_int4_bf16_t256},
    {Code::int4, DType::bf16, 128, gemm_ops_int4_bf16_t128},
    {Code::int4, DType::bf16, 64, gemm_ops_int4_bf16_t64},
    {Code::int4, DType::f16, 256, gemm_ops_int4_f16_t256},
    {Code::int4, DType::f16, 128, gemm_ops_int4_f16_t128},
    {Code::int4, DType::f16, 64, gemm_ops_int4_f16_t64},
    {Code::int8, DType::bf16, 256, gemm_ops_int8_bf16_t256},
    {Code::int8, DType::bf16, 128, gemm_ops_int8_bf16_t128},
    {Code::int8, DType::bf16, 64, gemm_ops_int8_bf16_t64},
    {Code::int8, DType::f16, 256, gemm_ops_int8_f16_t256},
    {Code::int8, DType::f16, 128, gemm_ops_int8_f16_t128},
    {Code::int8, DType::f16, 64, gemm_ops_int8_f16_t64},
    {Code::e4m3, DType::bf16, 256, gemm_ops_e4m3_bf16_t256},
    {Code::e4m3, DType::bf16, 128, gemm_ops_e4m3_bf16_t128},
    {Code::e4m3, DType::bf16, 64, gemm_ops_e4m3_bf16_t64},
    {Code::e4m3, DType::f16, 256, gemm_ops_e4m3_f16_t256},
    {Code::e4m3, DType::f16, 128, gemm_ops_e4m3_f16_t128},
    {Code::e4m3, DType::f16, 64, gemm_ops_e4m3_f16_t64},
};

}  // namespace

const GemmOps* gemm_ops(const Variant& v, int tile_tokens) {
  for (const Instance& i : kInstances)
    if (i.code == v.code && i.act == v.act && i.tile_tokens == tile_tokens) return &i.ops();
  return nullptr;
}

}  // namespace qmoe::cuda_wgmma
