#pragma once
// Element access for host tensors whose dtype is known only at run time (f32, f16, bf16, f64).
#include <cstdint>

#include "core/check.hpp"
#include "qmoe/tensor.hpp"

namespace qmoe {

inline bool is_float_activation(DType t) {
  return t == DType::f32 || t == DType::f16 || t == DType::bf16;
}

inline double load_as_double(const void* base, DType t, int64_t i) {
  switch (t) {
    case DType::f64: return static_cast<const double*>(base)[i];
    case DType::f32: return static_cast<const float*>(base)[i];
    case DType::f16: return to_float(static_cast<const half_t*>(base)[i]);
    case DType::bf16: return to_float(static_cast<const bf16_t*>(base)[i]);
    default: fail("cannot read {} elements as floating point", name(t));
  }
}

inline void store_from_double(void* base, DType t, int64_t i, double v) {
  switch (t) {
    case DType::f64: static_cast<double*>(base)[i] = v; return;
    case DType::f32: static_cast<float*>(base)[i] = static_cast<float>(v); return;
    case DType::f16: static_cast<half_t*>(base)[i] = to_half(static_cast<float>(v)); return;
    case DType::bf16: static_cast<bf16_t*>(base)[i] = to_bf16(static_cast<float>(v)); return;
    default: fail("cannot write {} elements as floating point", name(t));
  }
}

}  // namespace qmoe
