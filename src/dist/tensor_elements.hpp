#pragma once
// Element i of a contiguous host f32/bf16/f16 tensor as f32, and back (rounded to its dtype): how
// the host-side collectives and the dispatch form's combine read and write rows.
#include "core/convert.hpp"
#include "qmoe/tensor.hpp"

namespace qmoe {

inline float load(const TensorView& t, int64_t i) {
  return static_cast<float>(load_as_double(t.data(), t.dtype(), i));
}

inline void store(const TensorView& t, int64_t i, float v) {
  store_from_double(t.data(), t.dtype(), i, v);
}

}  // namespace qmoe
