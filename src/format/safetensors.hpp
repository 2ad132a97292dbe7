#pragma once
// Reading the safetensors format: an 8-byte little-endian header length, a JSON header mapping
// tensor names to {dtype, shape, data_offsets}, then the data area. Files are untrusted: every rule
// of the format is checked and a violation is an Error naming the file, the tensor and the rule.
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "format/mapped_file.hpp"
#include "qmoe/dtype.hpp"

namespace qmoe::format {

// Element types the safetensors format defines with whole-byte elements.
enum class StDType : uint8_t {
  boolean,
  u8,
  i8,
  f8_e5m2,
  f8_e4m3,
  f8_e8m0,
  i16,
  u16,
  f16,
  bf16,
  i32,
  u32,
  f32,
  f64,
  i64,
  u64
};
std::string_view name(StDType t);  // as written in headers: "BOOL", "U8", ..., "F8_E4M3"
int64_t size_of(StDType t);
std::optional<StDType> parse_st_dtype(std::string_view s);
std::optional<DType> to_dtype(StDType t);  // qmoe's own element type, where one exists
StDType to_st_dtype(DType t);

// Largest header accepted (the format's reference implementation uses the same bound).
inline constexpr uint64_t kMaxHeaderBytes = 100u << 20;

struct TensorInfo {
  std::string name;
  std::string file;  // file name, for messages
  StDType dtype = StDType::u8;
  std::vector<int64_t> shape;
  std::span<const std::byte> bytes;  // zero-copy view into the file

  int64_t numel() const;
  std::string describe() const;  // e.g. "I32[16, 8] in model.safetensors"
};

struct SafetensorsContents {
  std::vector<TensorInfo> tensors;  // in data-offset order
  std::map<std::string, std::string> metadata;
};

// Parses a complete file image. The returned views point into `file`.
SafetensorsContents parse_safetensors(std::span<const std::byte> file, std::string_view file_name);

struct TensorPart;  // tensor_part.hpp

// Every tensor of a model directory: model.safetensors.index.json when present (sharded),
// otherwise every *.safetensors file in the directory. Files stay mapped while the store lives.
class TensorStore {
 public:
  static TensorStore open(const std::filesystem::path& dir);
  // Tensors held elsewhere (arrays an engine hands over), read by the same adapters; their bytes
  // must outlive the store. `origin` stands for the directory in messages.
  static TensorStore from_tensors(std::vector<TensorInfo> tensors, const std::string& origin);

  const TensorInfo* find(std::string_view name) const;
  const TensorInfo& at(std::string_view name) const;  // throws Error naming the tensor and dir
  // Gives the memory pages between the first and last byte of the tensors named `prefix`... (per
  // mapped shard; the pages at both ends excepted) back to the kernel; the data stays readable
  // (it is read again from the file, usually the page cache, when touched). Keeps a loader's
  // resident memory near the converted weights rather than the file's size. Does nothing for a
  // store of the caller's arrays (from_tensors).
  void release_pages(std::string_view prefix) const;
  const std::map<std::string, TensorInfo, std::less<>>& tensors() const { return tensors_; }
  const std::filesystem::path& dir() const { return dir_; }

  // Reading tensor data goes through these (tensor_part.hpp), so that what a loader reads is
  // counted. read_parts gives the parts as a store of their own, each named as its tensor and
  // shaped as its part: a part that is one contiguous run of the file stays in place, the others
  // are gathered into memory the returned store owns. Throws Error naming the tensor when it is
  // missing, is not what the part expects, or the part reaches outside it.
  TensorStore read_parts(const std::vector<TensorPart>& parts) const;
  void read_part(const TensorPart& part, std::span<std::byte> out) const;
  // Bytes read_parts / read_part would read for `part` (checked the same way), reading none.
  int64_t part_bytes(const TensorPart& part) const;
  // Tensor bytes read through this store so far, by all threads (for tests and tools).
  int64_t bytes_read() const { return *bytes_read_; }

 private:
  void add_file(const std::filesystem::path& path);

  std::filesystem::path dir_;
  std::vector<std::unique_ptr<MappedFile>> files_;
  std::map<std::string, TensorInfo, std::less<>> tensors_;
  std::vector<std::vector<std::byte>> gathered_;  // the parts read_parts copied
  std::unique_ptr<std::atomic<int64_t>> bytes_read_ = std::make_unique<std::atomic<int64_t>>(0);
};

}  // namespace qmoe::format
