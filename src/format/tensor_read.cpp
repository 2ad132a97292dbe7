#include "format/tensor_read.hpp"

#include <fmt/ranges.h>

#include <cstring>

#include "core/check.hpp"

namespace qmoe::format {

void expect_tensor(const TensorInfo& t, const std::vector<StDType>& dtypes,
                   const std::vector<int64_t>& shape) {
  bool dtype_ok = false;
  std::string allowed;
  for (StDType d : dtypes) {
    dtype_ok = dtype_ok || d == t.dtype;
    allowed += fmt::format("{}{}", allowed.empty() ? "" : "|", name(d));
  }
  const bool shape_ok = std::equal(t.shape.begin(), t.shape.end(), shape.begin(), shape.end());
  check(dtype_ok && shape_ok, "tensor '{}' must be {}[{}], got {}", t.name, allowed,
        fmt::join(shape, ", "), t.describe());
}

namespace {

void decode_floats(const TensorInfo& t, std::vector<float>& out) {
  const std::byte* p = t.bytes.data();
  for (size_t i = 0; i < out.size(); ++i) {
    switch (t.dtype) {
      case StDType::f16: {
        half_t h;
        std::memcpy(&h, p + 2 * i, 2);
        out[i] = to_float(h);
        break;
      }
      case StDType::bf16: {
        bf16_t b;
        std::memcpy(&b, p + 2 * i, 2);
        out[i] = to_float(b);
        break;
      }
      default: std::memcpy(&out[i], p + 4 * i, 4);
    }
  }
}

}  // namespace

Matrix<float> read_floats(const TensorInfo& t, int64_t rows, int64_t cols) {
  expect_tensor(t, {StDType::f16, StDType::bf16, StDType::f32}, {rows, cols});
  Matrix<float> m(rows, cols);
  decode_floats(t, m.values);
  return m;
}

std::vector<float> read_floats(const TensorInfo& t, int64_t count) {
  expect_tensor(t, {StDType::f16, StDType::bf16, StDType::f32}, {count});
  std::vector<float> v(static_cast<size_t>(count));
  decode_floats(t, v);
  return v;
}

std::vector<int64_t> read_ints(const TensorInfo& t, int64_t count) {
  expect_tensor(t, {StDType::i32, StDType::i64}, {count});
  std::vector<int64_t> out(static_cast<size_t>(count));
  for (size_t i = 0; i < out.size(); ++i) {
    if (t.dtype == StDType::i32) {
      int32_t v;
      std::memcpy(&v, t.bytes.data() + 4 * i, 4);
      out[i] = v;
    } else {
      std::memcpy(&out[i], t.bytes.data() + 8 * i, 8);
    }
  }
  return out;
}

}  // namespace qmoe::format
