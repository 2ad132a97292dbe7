#pragma once
// A read-only, private memory mapping of a whole file; the bytes stay valid while it lives.
#include <cstddef>
#include <filesystem>
#include <span>

namespace qmoe::format {

class MappedFile {
 public:
  // Throws Error naming the path when the file cannot be opened, sized or mapped.
  explicit MappedFile(const std::filesystem::path& path);
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  std::span<const std::byte> bytes() const { return {data_, size_}; }
  const std::filesystem::path& path() const { return path_; }

 private:
  void release() noexcept;

  std::filesystem::path path_;
  const std::byte* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace qmoe::format
