// libFuzzer target for the safetensors reader: any byte string must either parse into tensors that
// lie inside the input and tile its data area, or be refused with qmoe::Error. Anything else (a
// crash, a sanitizer report, another exception type) is a bug. Each parsed tensor is then read in
// part (tensor_part.hpp, how a tensor-parallel rank reads its rows and columns) with ranges taken
// from the input's last bytes, raw or reduced to near the tensor's size: the part is read exactly
// or refused with qmoe::Error, never read outside the tensor.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include "format/safetensors.hpp"
#include "format/tensor_part.hpp"
#include "qmoe/error.hpp"

namespace {

// A part of `t` viewed with its last dimension as columns, from the 32 bytes `r` (4 int64: rows
// first/count, columns first/count), reduced to -1..size+1 when the input's last byte is even.
qmoe::format::TensorPart hostile_part(const qmoe::format::TensorInfo& t, const uint8_t* r,
                                      bool reduce) {
  int64_t v[4];
  std::memcpy(v, r, sizeof v);
  const int64_t cols = t.shape.empty() ? 1 : t.shape.back();
  const int64_t rows = cols > 0 ? t.numel() / cols : 0;
  if (reduce) {
    for (int i = 0; i < 4; ++i) {
      const int64_t size = (i < 2 ? rows : cols) + 3;
      v[i] = static_cast<int64_t>(static_cast<uint64_t>(v[i]) % static_cast<uint64_t>(size)) - 1;
    }
  }
  return qmoe::format::TensorPart{t.name,         {t.dtype},    t.shape,     cols,
                                  {{v[0], v[1]}}, {v[2], v[3]}, {v[1], v[3]}};
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const std::byte> file(reinterpret_cast<const std::byte*>(data), size);
  qmoe::format::SafetensorsContents c;
  try {
    c = qmoe::format::parse_safetensors(file, "fuzz");
  } catch (const qmoe::Error&) {
    return 0;
  }
  size_t covered = 0;
  for (const auto& t : c.tensors) {
    const bool inside = t.bytes.data() >= file.data() &&
                        t.bytes.data() + t.bytes.size() <= file.data() + file.size();
    if (!inside ||
        t.numel() * qmoe::format::size_of(t.dtype) != static_cast<int64_t>(t.bytes.size())) {
      __builtin_trap();
    }
    covered += t.bytes.size();
  }
  if (covered > size) __builtin_trap();
  if (size < 32) return 0;
  for (const auto& t : c.tensors) {
    try {
      const qmoe::format::TensorPart part = hostile_part(t, data + size - 32, data[size - 1] % 2);
      std::vector<std::byte> out(static_cast<size_t>(qmoe::format::part_bytes(t, part)));
      if (out.size() > t.bytes.size()) __builtin_trap();
      qmoe::format::read_part(t, part, out);
      const std::span<const std::byte> in_place = qmoe::format::contiguous_part(t, part);
      if (!in_place.empty() && std::memcmp(in_place.data(), out.data(), out.size()) != 0)
        __builtin_trap();
    } catch (const qmoe::Error&) {
    }
  }
  return 0;
}
