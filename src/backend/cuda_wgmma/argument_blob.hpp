#pragma once
// Per-expert argument arrays of a grouped GEMM (pointers, layouts, strides) packed into one host
// buffer for a single upload, each array starting on 256 bytes. Every array's size comes from the
// values added to it, so arrays of different element types cannot overlap.
#include <cstddef>
#include <cstring>
#include <vector>

namespace qmoe::cuda_wgmma {

class ArgumentBlob {
 public:
  explicit ArgumentBlob(size_t count) : count_(count) {}

  // `count` values of sizeof(T) from `values`; returns the array's byte offset.
  template <class T>
  size_t add_array(const T* values) {
    return append(values, sizeof(T), true);
  }
  // `count` copies of `value`; returns the array's byte offset.
  template <class T>
  size_t add_repeated(const T& value) {
    return append(&value, sizeof(T), false);
  }

  const std::vector<char>& bytes() const { return bytes_; }

 private:
  size_t append(const void* source, size_t element_bytes, bool per_element) {
    const size_t offset = (bytes_.size() + 255) / 256 * 256;
    bytes_.resize(offset + count_ * element_bytes);
    for (size_t i = 0; i < count_; ++i)
      std::memcpy(bytes_.data() + offset + i * element_bytes,
                  static_cast<const char*>(source) + (per_element ? i * element_bytes : 0),
                  element_bytes);
    return offset;
  }

  size_t count_;
  std::vector<char> bytes_;
};

}  // namespace qmoe::cuda_wgmma
