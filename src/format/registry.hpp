#pragma once
// The checkpoint formats, one line each in registry.cpp: the name, the quantization method and the
// per-expert adapter. Adding a format: its own file (adapter and method), its accessors declared
// and its line in registry.cpp, its CheckpointFormat value (qmoe/checkpoint.hpp), and the file in
// CMakeLists.txt.
#include <span>
#include <string_view>

#include "format/adapter.hpp"
#include "format/quant_method.hpp"
#include "qmoe/checkpoint.hpp"

namespace qmoe::format {

struct FormatEntry {
  CheckpointFormat format;
  std::string_view name;  // name(format), and the quant_method it answers to
  const QuantMethod& (*method)();
  const FormatAdapter& (*adapter)();  // null when the experts are not stored per projection
  bool quant_method = true;           // false: no config.json names it as its quant_method
};

std::span<const FormatEntry> formats();
const FormatEntry& format_entry(CheckpointFormat format);

}  // namespace qmoe::format
