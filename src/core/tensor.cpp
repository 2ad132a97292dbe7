#include "qmoe/tensor.hpp"

#include <cstring>

#include "core/check.hpp"
#include "core/host_memory.hpp"

namespace qmoe {

std::string to_string(Device d) {
  return d.kind == DeviceKind::cpu ? std::string("cpu") : fmt::format("cuda:{}", d.index);
}

namespace {

int checked_rank(size_t rank) {
  check(rank <= kMaxRank, "tensor rank {} exceeds the maximum of {}", rank, kMaxRank);
  return static_cast<int>(rank);
}

int64_t product(const Shape& shape, int rank) {
  int64_t n = 1;
  for (int i = 0; i < rank; ++i) n *= shape[i];
  return n;
}

}  // namespace

TensorView::TensorView(void* data, DType dtype, std::initializer_list<int64_t> shape, Device device)
    : TensorView(data, dtype, std::span<const int64_t>(shape.begin(), shape.size()), device) {}

TensorView::TensorView(void* data, DType dtype, std::span<const int64_t> shape, Device device)
    : data_(data), dtype_(dtype), device_(device), rank_(checked_rank(shape.size())) {
  int64_t stride = 1;
  for (int i = rank_ - 1; i >= 0; --i) {
    check(shape[i] >= 0, "tensor dimension {} is negative ({})", i, shape[i]);
    shape_[i] = shape[i];
    strides_[i] = stride;
    stride *= shape[i];
  }
}

TensorView::TensorView(void* data, DType dtype, std::span<const int64_t> shape,
                       std::span<const int64_t> strides, Device device)
    : data_(data), dtype_(dtype), device_(device), rank_(checked_rank(shape.size())) {
  check(strides.size() == shape.size(), "tensor has {} dimensions but {} strides", shape.size(),
        strides.size());
  for (int i = 0; i < rank_; ++i) {
    check(shape[i] >= 0, "tensor dimension {} is negative ({})", i, shape[i]);
    shape_[i] = shape[i];
    strides_[i] = strides[i];
  }
}

int64_t TensorView::numel() const { return product(shape_, rank_); }

bool TensorView::is_contiguous() const {
  int64_t expected = 1;
  for (int i = rank_ - 1; i >= 0; --i) {
    if (shape_[i] != 1 && strides_[i] != expected) return false;
    expected *= shape_[i];
  }
  return true;
}

std::string TensorView::describe() const {
  std::string dims;
  for (int i = 0; i < rank_; ++i) dims += fmt::format("{}{}", i ? ", " : "", shape_[i]);
  return fmt::format("{}[{}] ({})", name(dtype_), dims, to_string(device_));
}

Buffer::Buffer(DType dtype, std::initializer_list<int64_t> shape)
    : Buffer(dtype, std::span<const int64_t>(shape.begin(), shape.size())) {}

Buffer::Buffer(DType dtype, std::span<const int64_t> shape)
    : dtype_(dtype), rank_(checked_rank(shape.size())) {
  for (int i = 0; i < rank_; ++i) {
    check(shape[i] >= 0, "buffer dimension {} is negative ({})", i, shape[i]);
    shape_[i] = shape[i];
  }
  const int64_t bytes = numel() * size_of(dtype);
  // Round up so that SIMD loads of a whole 64-byte line past the last element stay inside.
  const size_t alloc = static_cast<size_t>((bytes + 63) / 64 * 64 + 64);
  bytes_ = std::unique_ptr<std::byte[], Free>(allocate_zeroed(alloc), Free{alloc});
}

void Buffer::Free::operator()(std::byte* p) const { free_zeroed(p, bytes); }

int64_t Buffer::numel() const { return rank_ == 0 && !bytes_ ? 0 : product(shape_, rank_); }

Buffer Buffer::clone() const {
  if (empty()) return {};  // an absent tensor (no zeros, no bias) stays absent
  Buffer copy(dtype_, shape());
  if (bytes_) std::memcpy(copy.data(), data(), static_cast<size_t>(nbytes()));
  return copy;
}

void Buffer::check_type(DType requested) const {
  check(requested == dtype_, "buffer holds {} but was read as {}", name(dtype_), name(requested));
}

TensorView Buffer::view() { return TensorView(data(), dtype_, shape()); }
TensorView Buffer::view() const { return TensorView(const_cast<void*>(data()), dtype_, shape()); }

}  // namespace qmoe
