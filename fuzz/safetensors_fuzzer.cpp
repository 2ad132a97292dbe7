// libFuzzer target for the safetensors reader: any byte string must either parse into tensors that
// lie inside the input and tile its data area, or be refused with qmoe::Error. Anything else (a
// crash, a sanitizer report, another exception type) is a bug.
#include <cstddef>
#include <cstdint>
#include <span>

#include "format/safetensors.hpp"
#include "qmoe/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const std::byte> file(reinterpret_cast<const std::byte*>(data), size);
  try {
    const qmoe::format::SafetensorsContents c = qmoe::format::parse_safetensors(file, "fuzz");
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
  } catch (const qmoe::Error&) {
  }
  return 0;
}
