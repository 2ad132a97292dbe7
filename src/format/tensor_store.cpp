#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <set>
#include <utility>

#include "core/check.hpp"
#include "format/regular_file.hpp"
#include "format/safetensors.hpp"
#include "format/tensor_part.hpp"

namespace qmoe::format {

namespace {

constexpr std::string_view kIndexName = "model.safetensors.index.json";

// A shard named by the index must be a plain file inside the model directory.
void check_shard_name(const std::string& shard, const std::filesystem::path& index) {
  check(!shard.empty() && shard.find('/') == std::string::npos &&
            shard.find('\\') == std::string::npos && shard != "." && shard != "..",
        "{}: weight_map names file '{}'; shards must be plain file names in the model directory",
        index.string(), shard);
}

nlohmann::json read_index(const std::filesystem::path& index) {
  const std::string text = read_regular_file(index, kMaxJsonBytes);
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    fail("{}: not valid JSON: {}", index.string(), e.what());
  }
}

}  // namespace

void TensorStore::add_file(const std::filesystem::path& path) {
  auto file = std::make_unique<MappedFile>(path);
  const std::string file_name = path.filename().string();
  // A damaged file is named by its path; a tensor remembers the file name the index refers to.
  SafetensorsContents contents = parse_safetensors(file->bytes(), path.string());
  for (TensorInfo& t : contents.tensors) {
    t.file = file_name;
    auto [at, inserted] = tensors_.emplace(t.name, t);
    check(inserted, "{}: tensor '{}' is stored twice, in {} and {}", dir_.string(), t.name,
          at->second.file, file_name);
  }
  files_.push_back(std::move(file));
}

TensorStore TensorStore::from_tensors(std::vector<TensorInfo> tensors, const std::string& origin) {
  TensorStore store;
  store.dir_ = origin;
  for (TensorInfo& t : tensors) {
    check(t.numel() * size_of(t.dtype) == int64_t(t.bytes.size()),
          "{}: tensor '{}' has {} bytes for {}", origin, t.name, t.bytes.size(), t.describe());
    const std::string name = t.name;
    check(store.tensors_.emplace(name, std::move(t)).second, "{}: tensor '{}' given twice", origin,
          name);
  }
  return store;
}

TensorStore TensorStore::open(const std::filesystem::path& dir) {
  check(std::filesystem::is_directory(dir), "{}: not a directory", dir.string());
  TensorStore store;
  store.dir_ = dir;
  const std::filesystem::path index = dir / kIndexName;
  if (std::filesystem::exists(index)) {
    const nlohmann::json root = read_index(index);
    check(root.is_object() && root.contains("weight_map") && root["weight_map"].is_object(),
          "{}: expected an object with a 'weight_map' object", index.string());
    const nlohmann::json& weight_map = root["weight_map"];
    std::set<std::string> shards;
    for (const auto& [tensor, shard] : weight_map.items()) {
      check(shard.is_string(), "{}: weight_map['{}'] must be a file name, got {}", index.string(),
            tensor, shard.dump());
      check_shard_name(shard.get<std::string>(), index);
      shards.insert(shard.get<std::string>());
    }
    for (const std::string& shard : shards) store.add_file(dir / shard);
    for (const auto& [tensor, shard] : weight_map.items()) {
      const TensorInfo* t = store.find(tensor);
      check(t && t->file == shard.get<std::string>(),
            "{}: weight_map puts tensor '{}' in {}, but {}", index.string(), tensor,
            shard.get<std::string>(),
            t ? fmt::format("it is in {}", t->file) : std::string("no shard holds it"));
    }
    return store;
  }
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    // Not only regular files: a FIFO or directory named *.safetensors is refused by name.
    if (entry.path().extension() == ".safetensors") {
      files.push_back(entry.path());
    }
  }
  check(!files.empty(), "{}: no {} and no *.safetensors file", dir.string(), kIndexName);
  std::sort(files.begin(), files.end());
  for (const auto& f : files) store.add_file(f);
  return store;
}

const TensorInfo* TensorStore::find(std::string_view name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

namespace {

// madvise(advice) over the whole pages between the first and the last byte of the tensors named
// `prefix`... in each shard: one module's tensors lie side by side in a shard, and its small ones
// (zero points, g_idx, 16-bit scales) share pages with each other, so page by page per tensor they
// would never be released (3 MB a layer in the loading benchmark). The two pages at the ends may
// hold a neighbour's bytes and are left alone; a page of another module caught in between (tensors
// not side by side) is only read again from the page cache when that module is converted. Only
// for tensors in mapped shards: the range never leaves one file's mapping.
void advise_pages(const std::map<std::string, TensorInfo, std::less<>>& tensors,
                  std::string_view prefix, int advice) {
  const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  std::map<std::string_view, std::pair<uintptr_t, uintptr_t>> extent;  // per shard: begin, end
  for (auto it = tensors.lower_bound(prefix);
       it != tensors.end() && std::string_view(it->first).starts_with(prefix); ++it) {
    if (it->second.bytes.empty()) continue;
    const auto at = reinterpret_cast<uintptr_t>(it->second.bytes.data());
    auto [e, added] = extent.try_emplace(it->second.file, at, at + it->second.bytes.size());
    e->second = {std::min(e->second.first, at),
                 std::max(e->second.second, at + it->second.bytes.size())};
  }
  for (const auto& [file, range] : extent) {
    const uintptr_t first = (range.first + page - 1) & ~(page - 1),
                    last = range.second & ~(page - 1);
    if (last > first) ::madvise(reinterpret_cast<void*>(first), last - first, advice);
  }
}

}  // namespace

void TensorStore::release_pages(std::string_view prefix) const {
  if (files_.empty()) return;  // tensors of a caller's arrays (from_tensors): not ours to drop
  advise_pages(tensors_, prefix, MADV_DONTNEED);
}

const TensorInfo& TensorStore::at(std::string_view name) const {
  const TensorInfo* t = find(name);
  check(t != nullptr, "{}: checkpoint has no tensor '{}'", dir_.string(), name);
  return *t;
}

TensorStore TensorStore::read_parts(const std::vector<TensorPart>& parts) const {
  TensorStore out;
  out.dir_ = dir_;
  int64_t read = 0;
  for (const TensorPart& part : parts) {
    const TensorInfo& t = at(part.name);
    TensorInfo p = t;
    p.shape = part.part_shape;
    p.bytes = contiguous_part(t, part);
    const int64_t bytes = part_bytes(part);
    if (p.bytes.size() != static_cast<size_t>(bytes)) {
      std::vector<std::byte>& copy = out.gathered_.emplace_back(static_cast<size_t>(bytes));
      read_part(part, copy);  // counts itself
      p.bytes = copy;
    } else {
      read += bytes;
    }
    check(out.tensors_.emplace(part.name, std::move(p)).second,
          "{}: tensor '{}' is read as two parts at once", dir_.string(), part.name);
  }
  *bytes_read_ += read;
  return out;
}

void TensorStore::read_part(const TensorPart& part, std::span<std::byte> out) const {
  format::read_part(at(part.name), part, out);
  *bytes_read_ += static_cast<int64_t>(out.size());
}

int64_t TensorStore::part_bytes(const TensorPart& part) const {
  return format::part_bytes(at(part.name), part);
}

}  // namespace qmoe::format
