// libFuzzer target for model.safetensors.index.json (TensorStore::open in
// src/format/tensor_store.cpp): each input is written as the index of a directory that holds two
// small valid shards, a.safetensors (tensor "x") and b.safetensors (tensor "y"), and opened. It
// must either give a store whose every tensor lies in a shard the index names, or be refused with
// qmoe::Error. Anything else (a crash, a sanitizer report, another exception type, a path outside
// the directory) is a bug.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "format/safetensors.hpp"
#include "qmoe/error.hpp"

namespace {

std::filesystem::path g_dir;

// A safetensors file holding one f32 tensor of two elements.
void write_shard(const std::filesystem::path& path, const std::string& tensor) {
  const std::string header =
      "{\"" + tensor + "\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}";
  std::ofstream out(path, std::ios::binary);
  const uint64_t length = header.size();
  for (int i = 0; i < 8; ++i) out.put(static_cast<char>(length >> (8 * i)));
  out << header << std::string(8, '\0');
}

void write_file(const std::filesystem::path& path, const uint8_t* data, size_t size) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  const char* tmp = std::getenv("TMPDIR");
  const std::filesystem::path base =
      std::filesystem::exists("/dev/shm") ? "/dev/shm" : (tmp ? tmp : "/tmp");
  g_dir = base / ("qmoe-index-fuzz-" + std::to_string(getpid()));
  std::filesystem::create_directories(g_dir);
  write_shard(g_dir / "a.safetensors", "x");
  write_shard(g_dir / "b.safetensors", "y");
  std::atexit([] { std::filesystem::remove_all(g_dir); });
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  write_file(g_dir / "model.safetensors.index.json", data, size);
  try {
    const qmoe::format::TensorStore store = qmoe::format::TensorStore::open(g_dir);
    for (const auto& [name, info] : store.tensors()) {
      if (info.file != "a.safetensors" && info.file != "b.safetensors") __builtin_trap();
      if (name != "x" && name != "y") __builtin_trap();
    }
  } catch (const qmoe::Error&) {
  }
  return 0;
}
