#include "cli/checkpoint_edit.hpp"

#include <unistd.h>

#include <cstring>
#include <fstream>

#include "format/safetensors.hpp"
#include "qmoe/error.hpp"

namespace qmoe::test {

TempDir::TempDir(const std::string& name)
    : path_(std::filesystem::temp_directory_path() /
            ("qmoe_cli_" + std::to_string(::getpid()) + "_" + name)) {
  std::filesystem::remove_all(path_);
  std::filesystem::create_directories(path_);
}

TempDir::~TempDir() {
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

void overwrite_tensor_bytes(const std::filesystem::path& file, const std::string& tensor,
                            size_t offset, const std::vector<std::byte>& bytes) {
  std::vector<char> image(std::filesystem::file_size(file));
  std::ifstream(file, std::ios::binary)
      .read(image.data(), static_cast<std::streamsize>(image.size()));
  const auto view = std::as_bytes(std::span<const char>(image));
  for (const format::TensorInfo& t : format::parse_safetensors(view, file.string()).tensors) {
    if (t.name != tensor) continue;
    if (offset + bytes.size() > t.bytes.size()) throw Error("overwrite past the tensor's end");
    std::memcpy(image.data() + (t.bytes.data() - view.data()) + offset, bytes.data(), bytes.size());
    std::ofstream(file, std::ios::binary)
        .write(image.data(), static_cast<std::streamsize>(image.size()));
    return;
  }
  throw Error(file.string() + " has no tensor " + tensor);
}

void set_config(const std::filesystem::path& dir, const std::string& key,
                const nlohmann::json& value) {
  nlohmann::ordered_json c;
  std::ifstream(dir / "config.json") >> c;
  c[key] = value;
  std::ofstream(dir / "config.json") << c.dump(2);
}

}  // namespace qmoe::test
