#include "format/registry.hpp"

#include <fmt/format.h>

#include <string>

#include "core/check.hpp"

namespace qmoe::format {

// Defined in each format's own file.
const QuantMethod& gptq_method();
const QuantMethod& awq_method();
const QuantMethod& compressed_tensors_method();
const QuantMethod& mxfp4_method();
const QuantMethod& quark_method();
const FormatAdapter& gptq_adapter();
const FormatAdapter& awq_adapter();
const FormatAdapter& compressed_tensors_adapter();
const FormatAdapter& quark_adapter();

namespace {

constexpr FormatEntry kFormats[] = {
    {CheckpointFormat::gptq, "gptq", &gptq_method, &gptq_adapter},
    {CheckpointFormat::awq, "awq", &awq_method, &awq_adapter},
    {CheckpointFormat::compressed_tensors, "compressed-tensors", &compressed_tensors_method,
     &compressed_tensors_adapter},
    // vLLM's moe_wna16 reading of GPTQ/AWQ checkpoints: no layout of its own, GPTQ's module rules.
    {CheckpointFormat::moe_wna16, "moe_wna16", &gptq_method, nullptr, false},
    // gpt-oss stores each layer's experts fused (gpt_oss_mxfp4.hpp).
    {CheckpointFormat::mxfp4, "mxfp4", &mxfp4_method, nullptr},
    {CheckpointFormat::quark, "quark", &quark_method, &quark_adapter},
};

}  // namespace

std::span<const FormatEntry> formats() { return kFormats; }

const FormatEntry& format_entry(CheckpointFormat format) {
  for (const FormatEntry& f : kFormats)
    if (f.format == format) return f;
  fail("checkpoint format {} is not registered", static_cast<int>(format));
}

}  // namespace qmoe::format

namespace qmoe {

std::string_view name(CheckpointFormat f) {
  for (const format::FormatEntry& entry : format::formats())
    if (entry.format == f) return entry.name;
  return "?";
}

CheckpointFormat parse_checkpoint_format(std::string_view s) {
  std::string valid;
  for (const format::FormatEntry& entry : format::formats()) {
    if (entry.name == s) return entry.format;
    valid += fmt::format("{}{}", valid.empty() ? "" : ", ", entry.name);
  }
  fail("unknown checkpoint format '{}' (valid: {})", s, valid);
}

}  // namespace qmoe
