#pragma once
// A small non-owning view of a strided tensor (rank <= 4) and an owning host buffer.
#include <array>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <span>
#include <string>

#include "qmoe/dtype.hpp"

namespace qmoe {

enum class DeviceKind : uint8_t { cpu, cuda };

struct Device {
  DeviceKind kind = DeviceKind::cpu;
  int index = 0;
  friend bool operator==(const Device&, const Device&) = default;
};

std::string to_string(Device d);

inline constexpr int kMaxRank = 4;
using Shape = std::array<int64_t, kMaxRank>;

class TensorView {
 public:
  TensorView() = default;
  // Contiguous (row-major) view.
  TensorView(void* data, DType dtype, std::initializer_list<int64_t> shape, Device device = {});
  TensorView(void* data, DType dtype, std::span<const int64_t> shape, Device device = {});
  // Arbitrary strides, in elements.
  TensorView(void* data, DType dtype, std::span<const int64_t> shape,
             std::span<const int64_t> strides, Device device = {});

  void* data() const { return data_; }
  template <class T>
  T* data_as() const {
    return static_cast<T*>(data_);
  }
  DType dtype() const { return dtype_; }
  Device device() const { return device_; }
  int rank() const { return rank_; }
  int64_t dim(int i) const { return shape_[i]; }
  int64_t stride(int i) const { return strides_[i]; }
  int64_t numel() const;
  int64_t nbytes() const { return numel() * size_of(dtype_); }
  bool is_contiguous() const;
  std::string describe() const;  // e.g. "bf16[7, 512] (cpu)"

 private:
  void* data_ = nullptr;
  DType dtype_ = DType::f32;
  Device device_{};
  int rank_ = 0;
  Shape shape_{};
  Shape strides_{};
};

// Owning, 64-byte aligned, contiguous host memory. Movable, not copyable (copy with clone()).
class Buffer {
 public:
  Buffer() = default;
  Buffer(DType dtype, std::initializer_list<int64_t> shape);
  Buffer(DType dtype, std::span<const int64_t> shape);

  Buffer(Buffer&&) noexcept = default;
  Buffer& operator=(Buffer&&) noexcept = default;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  Buffer clone() const;

  bool empty() const { return rank_ == 0 && !bytes_; }
  DType dtype() const { return dtype_; }
  int rank() const { return rank_; }
  int64_t dim(int i) const { return shape_[i]; }
  std::span<const int64_t> shape() const { return {shape_.data(), static_cast<size_t>(rank_)}; }
  int64_t numel() const;
  int64_t nbytes() const { return numel() * size_of(dtype_); }

  void* data() { return bytes_.get(); }
  const void* data() const { return bytes_.get(); }
  template <class T>
  T* data_as() {
    check_type(dtype_of<T>());
    return static_cast<T*>(data());
  }
  template <class T>
  const T* data_as() const {
    check_type(dtype_of<T>());
    return static_cast<const T*>(data());
  }
  template <class T>
  std::span<T> span() {
    return {data_as<T>(), static_cast<size_t>(numel())};
  }
  template <class T>
  std::span<const T> span() const {
    return {data_as<T>(), static_cast<size_t>(numel())};
  }

  TensorView view();
  TensorView view() const;  // the view is writable; constness is the caller's promise

 private:
  struct Free {
    size_t bytes;  // as allocated (no default member initializer: Buffer is still incomplete here)
    void operator()(std::byte* p) const;
  };
  void check_type(DType requested) const;

  DType dtype_ = DType::f32;
  int rank_ = 0;
  Shape shape_{};
  std::unique_ptr<std::byte[], Free> bytes_;
};

}  // namespace qmoe
