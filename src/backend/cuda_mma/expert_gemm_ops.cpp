#include "backend/cuda_mma/expert_gemm_ops.hpp"

namespace qmoe::cuda_mma {

// Defined by the generated instance files (CMakeLists.txt): weight element, activation dtype.
const GemmOps& gemm_ops_int4_bf16();
const GemmOps& gemm_ops_int4_f16();
const GemmOps& gemm_ops_int8_bf16();
const GemmOps& gemm_ops_int8_f16();
const GemmOps& gemm_ops_e2m1_bf16();
const GemmOps& gemm_ops_e2m1_f16();

namespace {

struct Instance {
  Variant variant;
  const GemmOps& (*ops)();
};

constexpr Instance kInstances[] = {
    {{WeightElement::int4, DType::bf16}, gemm_ops_int4_bf16},
    {{WeightElement::int4, DType::f16}, gemm_ops_int4_f16},
    {{WeightElement::int8, DType::bf16}, gemm_ops_int8_bf16},
    {{WeightElement::int8, DType::f16}, gemm_ops_int8_f16},
    {{WeightElement::e2m1, DType::bf16}, gemm_ops_e2m1_bf16},
    {{WeightElement::e2m1, DType::f16}, gemm_ops_e2m1_f16},
};

}  // namespace

const GemmOps* gemm_ops(const Variant& v) {
  for (const Instance& i : kInstances)
    if (i.variant == v) return &i.ops();
  return nullptr;
}

}  // namespace qmoe::cuda_mma
