#include "tensor_args.hpp"

#include <array>
#include <cstdint>
#include <span>

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
TensorView view_of_array(const Array& a, const char* what, int rank) {
  check(a.ndim() == size_t(rank), "{} must have {} dimensions, got {}", what, rank, a.ndim());
  std::array<int64_t, 4> shape{}, strides{};
  for (int i = 0; i < rank; ++i) shape[i] = int64_t(a.shape(i)), strides[i] = a.stride(i);
  return TensorView(const_cast<void*>(static_cast<const void*>(a.data())),
                    dtype_of(a.dtype(), what), std::span(shape.data(), size_t(rank)),
                    std::span(strides.data(), size_t(rank)),
                    device_of(a.device_type(), a.device_id(), what));
}

}  // namespace

TensorView view_of(const nb::ndarray<>& a, const char* what, int rank) {
  return view_of_array(a, what, rank);
}
TensorView view_of(const nb::ndarray<nb::ro>& a, const char* what, int rank) {
  return view_of_array(a, what, rank);
}

TensorView view_of(const nb::tuple& t, const char* what, int rank) {
  const size_t items = 3 + 2 * size_t(rank);
  check(t.size() == items, "{}: expected a {}-tuple tensor description, got {} items", what, items,
        t.size());
  auto at = [&](size_t i) { return nb::cast<int64_t>(t[i]); };
  std::array<int64_t, 4> shape{}, strides{};
  for (int i = 0; i < rank; ++i) shape[i] = at(2 + i), strides[i] = at(2 + rank + i);
  const int64_t device = at(items - 1);
  const int64_t code = at(1);
  check(code >= 0 && code <= int64_t(DType::u32), "{}: bad dtype code {}", what, code);
  return TensorView(reinterpret_cast<void*>(static_cast<uintptr_t>(at(0))), DType(code),
                    std::span(shape.data(), size_t(rank)), std::span(strides.data(), size_t(rank)),
                    device < 0 ? Device{} : Device{DeviceKind::cuda, static_cast<int>(device)});
}

}  // namespace qmoe::python
