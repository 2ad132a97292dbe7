#pragma once
// Small, deliberate damage to checkpoints written by `qmoe sample`, for the CLI tests: overwrite
// bytes of one stored tensor, or change a config.json key.
#include <cstddef>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace qmoe::test {

// A fresh directory under the temporary directory, removed with the object.
class TempDir {
 public:
  explicit TempDir(const std::string& name);
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::string operator/(const std::string& child) const { return (path_ / child).string(); }

 private:
  std::filesystem::path path_;
};

// Overwrites `bytes` at byte `offset` of tensor `tensor` in the safetensors file `file`.
void overwrite_tensor_bytes(const std::filesystem::path& file, const std::string& tensor,
                            size_t offset, const std::vector<std::byte>& bytes);

// Sets config.json[key] = value in `dir`.
void set_config(const std::filesystem::path& dir, const std::string& key,
                const nlohmann::json& value);

}  // namespace qmoe::test
