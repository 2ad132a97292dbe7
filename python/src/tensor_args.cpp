#include "tensor_args.hpp"

#include <array>
#include <cstdint>

#include "core/check.hpp"

namespace nb = nanobind;

namespace qmoe::python {

namespace {

DType dtype_of(nb::dlpack::dtype t, const char* what) {
  using Code = nb::dlpack::dtype_code;
  const auto code = static_cast<Code>(t.code);
  if (t.lanes == 1) {
    if (code == Code::Float && t.bits == 32) return DType::f32;
    if (code == Code::Float && t.bits == 16) return DType::f16;
    if (code == Code::Float && t.bits == 64) return DType::f64;
    if (code == Code::Bfloat && t.bits == 16) return DType::bf16;
    if (code == Code::Int && t.bits == 32) return DType::i32;
    if (code == Code::Int && t.bits == 64) return DType::i64;
    if (code == Code::UInt && t.bits == 8) return DType::u8;
  }
  fail(
      "{}: unsupported element type (DLPack code {}, {} bits, {} lanes); qmoe takes float32, "
      "float16, bfloat16, int32 and uint8",
      what, int(t.code), int(t.bits), int(t.lanes));
}

Device device_of(int32_t type, int32_t id, const char* what) {
  if (type == nb::device::cpu::value) return Device{};
  if (type == nb::device::cuda::value) return Device{DeviceKind::cuda, id};
  fail("{}: DLPack device type {} is neither the CPU nor CUDA", what, type);
}

template <class Array>
TensorView view_of_array(const Array& a, const char* what) {
  check(a.ndim() == 2, "{} must have 2 dimensions, got {}", what, a.ndim());
  const std::array<int64_t, 2> shape{int64_t(a.shape(0)), int64_t(a.shape(1))};
  const std::array<int64_t, 2> strides{a.stride(0), a.stride(1)};
  return TensorView(const_cast<void*>(static_cast<const void*>(a.data())),
                    dtype_of(a.dtype(), what), shape, strides,
                    device_of(a.device_type(), a.device_id(), what));
}

}  // namespace

TensorView view_of(const nb::ndarray<>& a, const char* what) { return view_of_array(a, what); }
TensorView view_of(const nb::ndarray<nb::ro>& a, const char* what) {
  return view_of_array(a, what);
}

TensorView view_of(const nb::tuple& t, const char* what) {
  check(t.size() == 7, "{}: expected a 7-tuple tensor description, got {} items", what, t.size());
  auto at = [&](size_t i) { return nb::cast<int64_t>(t[i]); };
  const std::array<int64_t, 2> shape{at(2), at(3)}, strides{at(4), at(5)};
  const int64_t device = at(6);
  const int64_t code = at(1);
  check(code >= 0 && code <= int64_t(DType::u32), "{}: bad dtype code {}", what, code);
  return TensorView(reinterpret_cast<void*>(static_cast<uintptr_t>(at(0))), DType(code), shape,
                    strides,
                    device < 0 ? Device{} : Device{DeviceKind::cuda, static_cast<int>(device)});
}

}  // namespace qmoe::python
