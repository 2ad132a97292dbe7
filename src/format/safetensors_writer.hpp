#pragma once
// Writing safetensors files (fixtures, `qmoe demo`, round-trip tests). Tensors are laid out in the
// order they were added, back to back; the header is padded with spaces to a multiple of 8 bytes
// so the data area starts aligned.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "format/safetensors.hpp"

namespace qmoe::format {

class SafetensorsWriter {
 public:
  void add(std::string name, StDType dtype, std::vector<int64_t> shape,
           std::span<const std::byte> data);
  template <class T>
  void add(std::string name, StDType dtype, std::vector<int64_t> shape, std::span<const T> data) {
    add(std::move(name), dtype, std::move(shape), std::as_bytes(data));
  }

  int64_t data_bytes() const { return static_cast<int64_t>(data_.size()); }
  std::vector<std::string> names() const;
  // The whole file image (header length, header, data).
  std::vector<std::byte> serialize(const std::map<std::string, std::string>& metadata = {
                                       {"format", "pt"}}) const;
  void write(const std::filesystem::path& path) const;

 private:
  struct Entry {
    std::string name;
    StDType dtype;
    std::vector<int64_t> shape;
    int64_t begin, end;
  };
  std::vector<Entry> entries_;
  std::vector<std::byte> data_;
};

}  // namespace qmoe::format
