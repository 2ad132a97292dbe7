#include "format/safetensors_writer.hpp"

#include <fstream>
#include <nlohmann/json.hpp>

#include "core/check.hpp"

namespace qmoe::format {

void SafetensorsWriter::add(std::string name, StDType dtype, std::vector<int64_t> shape,
                            std::span<const std::byte> data) {
  int64_t numel = 1;
  for (int64_t d : shape) numel *= d;
  check(numel * size_of(dtype) == static_cast<int64_t>(data.size()),
        "safetensors writer: tensor '{}' has {} bytes but its shape needs {}", name, data.size(),
        numel * size_of(dtype));
  for (const Entry& e : entries_) {
    check(e.name != name, "safetensors writer: tensor '{}' added twice", name);
  }
  const auto begin = static_cast<int64_t>(data_.size());
  data_.insert(data_.end(), data.begin(), data.end());
  entries_.push_back(
      {std::move(name), dtype, std::move(shape), begin, static_cast<int64_t>(data_.size())});
}

std::vector<std::string> SafetensorsWriter::names() const {
  std::vector<std::string> out;
  for (const Entry& e : entries_) out.push_back(e.name);
  return out;
}

std::vector<std::byte> SafetensorsWriter::serialize(
    const std::map<std::string, std::string>& metadata) const {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  for (const Entry& e : entries_) {
    header[e.name] = {
        {"dtype", name(e.dtype)}, {"shape", e.shape}, {"data_offsets", {e.begin, e.end}}};
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  const uint64_t length = text.size();
  std::vector<std::byte> out(8 + text.size() + data_.size());
  std::memcpy(out.data(), &length, 8);
  std::memcpy(out.data() + 8, text.data(), text.size());
  if (!data_.empty()) std::memcpy(out.data() + 8 + text.size(), data_.data(), data_.size());
  return out;
}

void SafetensorsWriter::write(const std::filesystem::path& path) const {
  const std::vector<std::byte> image = serialize();
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  check(out.good(), "{}: cannot create", path.string());
  out.write(reinterpret_cast<const char*>(image.data()),
            static_cast<std::streamsize>(image.size()));
  check(out.good(), "{}: write failed", path.string());
}

}  // namespace qmoe::format
