#pragma once
// Opening the files of a model directory defensively: only regular files are read, so a FIFO
// named config.json cannot hang the reader and a link to /dev/zero cannot grow memory without end.
#include <cstddef>
#include <filesystem>
#include <string>

namespace qmoe::format {

// Largest config.json / quantize_config.json / model.safetensors.index.json accepted. The index
// of the largest public MoE checkpoints is a few MB.
inline constexpr size_t kMaxJsonBytes = 64u << 20;

// Opens `path` read-only; throws Error naming the path when it is missing, unreadable or not a
// regular file (directory, FIFO, device, socket). Returns the descriptor; `size` gets the size.
int open_regular_file(const std::filesystem::path& path, size_t& size);

// The whole file; refused when larger than `max_bytes`.
std::string read_regular_file(const std::filesystem::path& path, size_t max_bytes);

}  // namespace qmoe::format
