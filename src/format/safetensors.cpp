#include "format/safetensors.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <utility>

#include "core/check.hpp"

namespace qmoe::format {

static_assert(std::endian::native == std::endian::little,
              "safetensors stores little-endian data; qmoe reads it in place");

namespace {

struct StDTypeName {
  StDType type;
  std::string_view text;
  int64_t bytes;
};

constexpr std::array<StDTypeName, 16> kStDTypes{{
    {StDType::boolean, "BOOL", 1},
    {StDType::u8, "U8", 1},
    {StDType::i8, "I8", 1},
    {StDType::f8_e5m2, "F8_E5M2", 1},
    {StDType::f8_e4m3, "F8_E4M3", 1},
    {StDType::f8_e8m0, "F8_E8M0", 1},
    {StDType::i16, "I16", 2},
    {StDType::u16, "U16", 2},
    {StDType::f16, "F16", 2},
    {StDType::bf16, "BF16", 2},
    {StDType::i32, "I32", 4},
    {StDType::u32, "U32", 4},
    {StDType::f32, "F32", 4},
    {StDType::f64, "F64", 8},
    {StDType::i64, "I64", 8},
    {StDType::u64, "U64", 8},
}};

const StDTypeName& entry(StDType t) {
  for (const auto& e : kStDTypes)
    if (e.type == t) return e;
  fail("unknown safetensors dtype {}", static_cast<int>(t));
}

using json = nlohmann::json;

// Parses the header JSON, refusing nesting deeper than the format uses (a tensor entry's shape
// array is the deepest container) and duplicate tensor names, which a plain parse would silently
// collapse into the last one.
json parse_header_json(std::string_view text, std::string_view file) {
  std::set<std::string> names;
  auto guard = [&](int depth, json::parse_event_t event, json& parsed) {
    if ((event == json::parse_event_t::object_start || event == json::parse_event_t::array_start) &&
        depth > 2) {
      fail("{}: safetensors header nests deeper than the format allows (depth {}, at most 2)", file,
           depth + 1);
    }
    if (event == json::parse_event_t::key && depth == 1) {
      check(names.insert(parsed.get<std::string>()).second,
            "{}: tensor '{}' appears twice in the header", file, parsed.get<std::string>());
    }
    return true;
  };
  try {
    return json::parse(text.begin(), text.end(), guard);
  } catch (const json::exception& e) {
    fail("{}: safetensors header is not valid JSON: {}", file, e.what());
  }
}

int64_t as_offset(const json& v, std::string_view file, const std::string& tensor,
                  std::string_view field) {
  check(v.is_number_unsigned() &&
            v.get<uint64_t>() <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max()),
        "{}: tensor '{}': {} must hold non-negative integers below 2^63, got {}", file, tensor,
        field, v.dump());
  return static_cast<int64_t>(v.get<uint64_t>());
}

TensorInfo parse_entry(const std::string& tensor, const json& e, std::span<const std::byte> data,
                       std::string_view file) {
  check(!tensor.empty(), "{}: a tensor has an empty name", file);
  check(e.is_object(), "{}: tensor '{}': entry must be an object with dtype, shape, data_offsets",
        file, tensor);
  for (const char* field : {"dtype", "shape", "data_offsets"}) {
    check(e.contains(field), "{}: tensor '{}': missing field '{}'", file, tensor, field);
  }
  TensorInfo info;
  info.name = tensor;
  info.file = std::string(file);

  const json& dtype = e["dtype"];
  check(dtype.is_string(), "{}: tensor '{}': dtype must be a string, got {}", file, tensor,
        dtype.dump());
  const auto parsed = parse_st_dtype(dtype.get<std::string>());
  if (!parsed) {
    std::string valid;
    for (const auto& d : kStDTypes) valid += fmt::format("{}{}", valid.empty() ? "" : ", ", d.text);
    fail("{}: tensor '{}': unknown dtype '{}' (known: {})", file, tensor, dtype.get<std::string>(),
         valid);
  }
  info.dtype = *parsed;

  const json& shape = e["shape"];
  check(shape.is_array(), "{}: tensor '{}': shape must be an array, got {}", file, tensor,
        shape.dump());
  uint64_t numel = 1;
  for (const json& d : shape) {
    const int64_t dim = as_offset(d, file, tensor, "shape");
    info.shape.push_back(dim);
    check(!__builtin_mul_overflow(numel, static_cast<uint64_t>(dim), &numel),
          "{}: tensor '{}': shape {} overflows 64 bits", file, tensor, shape.dump());
  }
  uint64_t nbytes = 0;
  check(!__builtin_mul_overflow(numel, static_cast<uint64_t>(size_of(info.dtype)), &nbytes),
        "{}: tensor '{}': shape {} times {} bytes per element overflows 64 bits", file, tensor,
        shape.dump(), size_of(info.dtype));

  const json& offsets = e["data_offsets"];
  check(offsets.is_array() && offsets.size() == 2,
        "{}: tensor '{}': data_offsets must be [begin, end], got {}", file, tensor, offsets.dump());
  const int64_t begin = as_offset(offsets[0], file, tensor, "data_offsets");
  const int64_t end = as_offset(offsets[1], file, tensor, "data_offsets");
  check(begin <= end, "{}: tensor '{}': data_offsets [{}, {}] end before they begin", file, tensor,
        begin, end);
  check(static_cast<uint64_t>(end - begin) == nbytes,
        "{}: tensor '{}': data_offsets span {} bytes but shape {} of {} needs {}", file, tensor,
        end - begin, shape.dump(), name(info.dtype), nbytes);
  check(static_cast<uint64_t>(end) <= data.size(),
        "{}: tensor '{}': data_offsets [{}, {}] run past the data area of {} bytes", file, tensor,
        begin, end, data.size());
  info.bytes = data.subspan(static_cast<size_t>(begin), static_cast<size_t>(end - begin));
  return info;
}

std::map<std::string, std::string> parse_metadata(const json& m, std::string_view file) {
  check(m.is_object(), "{}: __metadata__ must be an object of strings, got {}", file, m.dump());
  std::map<std::string, std::string> out;
  for (const auto& [key, value] : m.items()) {
    check(value.is_string(), "{}: __metadata__ '{}' must be a string, got {}", file, key,
          value.dump());
    out.emplace(key, value.get<std::string>());
  }
  return out;
}

// The format requires the tensors to tile the data area exactly: no overlap (one byte read as two
// tensors) and no hole (unindexed bytes, which would allow polyglot files).
void check_tiling(std::vector<TensorInfo>& tensors, std::span<const std::byte> data,
                  std::string_view file) {
  auto offset = [&](const std::byte* p) { return p - data.data(); };
  std::sort(tensors.begin(), tensors.end(), [&](const TensorInfo& a, const TensorInfo& b) {
    return std::pair(a.bytes.data(), a.bytes.size()) < std::pair(b.bytes.data(), b.bytes.size());
  });
  int64_t covered = 0;
  const TensorInfo* previous = nullptr;
  for (const TensorInfo& t : tensors) {
    const int64_t begin = offset(t.bytes.data());
    check(begin >= covered, "{}: tensor '{}': bytes [{}, {}) overlap tensor '{}' (ends at {})",
          file, t.name, begin, begin + static_cast<int64_t>(t.bytes.size()),
          previous ? previous->name : "", covered);
    check(begin == covered, "{}: tensor '{}': data area has a hole of {} bytes at offset {}", file,
          t.name, begin - covered, covered);
    covered = begin + static_cast<int64_t>(t.bytes.size());
    previous = &t;
  }
  check(covered == static_cast<int64_t>(data.size()),
        "{}: data area has {} trailing bytes not covered by any tensor", file,
        static_cast<int64_t>(data.size()) - covered);
}

}  // namespace

std::string_view name(StDType t) { return entry(t).text; }
int64_t size_of(StDType t) { return entry(t).bytes; }

std::optional<StDType> parse_st_dtype(std::string_view s) {
  for (const auto& e : kStDTypes)
    if (e.text == s) return e.type;
  return std::nullopt;
}

std::optional<DType> to_dtype(StDType t) {
  switch (t) {
    case StDType::u8: return DType::u8;
    case StDType::i8: return DType::i8;
    case StDType::i16: return DType::i16;
    case StDType::u16: return DType::u16;
    case StDType::f16: return DType::f16;
    case StDType::bf16: return DType::bf16;
    case StDType::i32: return DType::i32;
    case StDType::u32: return DType::u32;
    case StDType::f32: return DType::f32;
    case StDType::f64: return DType::f64;
    case StDType::i64: return DType::i64;
    default: return std::nullopt;
  }
}

StDType to_st_dtype(DType t) {
  for (const auto& e : kStDTypes)
    if (to_dtype(e.type) == t) return e.type;
  fail("dtype {} has no safetensors equivalent", name(t));
}

int64_t TensorInfo::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string TensorInfo::describe() const {
  return fmt::format("{}[{}] in {}", format::name(dtype), fmt::join(shape, ", "), file);
}

SafetensorsContents parse_safetensors(std::span<const std::byte> file, std::string_view file_name) {
  check(file.size() >= 8,
        "{}: {} bytes is too short for a safetensors file (it starts with an 8-byte header length)",
        file_name, file.size());
  uint64_t header_bytes = 0;
  std::memcpy(&header_bytes, file.data(), 8);
  check(header_bytes <= kMaxHeaderBytes, "{}: header length {} exceeds the limit of {} bytes",
        file_name, header_bytes, kMaxHeaderBytes);
  check(header_bytes <= file.size() - 8,
        "{}: header length {} runs past the end of the file ({} bytes follow the length field)",
        file_name, header_bytes, file.size() - 8);
  const std::string_view header(reinterpret_cast<const char*>(file.data()) + 8, header_bytes);
  check(!header.empty() && header.front() == '{', "{}: safetensors header must be a JSON object",
        file_name);
  const json root = parse_header_json(header, file_name);
  check(root.is_object(), "{}: safetensors header must be a JSON object", file_name);

  const std::span<const std::byte> data = file.subspan(8 + header_bytes);
  SafetensorsContents contents;
  for (const auto& [key, value] : root.items()) {
    if (key == "__metadata__") {
      contents.metadata = parse_metadata(value, file_name);
    } else {
      contents.tensors.push_back(parse_entry(key, value, data, file_name));
    }
  }
  check_tiling(contents.tensors, data, file_name);
  return contents;
}

}  // namespace qmoe::format
