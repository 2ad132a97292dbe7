#pragma once
// One adapter per checkpoint format that stores its experts per projection: reads one expert
// projection's tensors into the unpacked Projection and writes them back, owning every quirk of
// the format (pack direction, nibble order, zero-point offset, transposes). Nothing outside the
// format's file (its adapter and its quantization method) knows them.
#include <string>

#include "format/model_config.hpp"
#include "format/projection.hpp"
#include "format/safetensors.hpp"
#include "format/safetensors_writer.hpp"
#include "qmoe/checkpoint.hpp"

namespace qmoe::format {

// What a reader needs to know about one projection besides its tensors.
struct ProjectionSpec {
  std::string module;  // e.g. "model.layers.0.mlp.experts.3.gate_proj"
  int64_t N = 0, K = 0;
  QuantScheme scheme;
  int gptq_version = 1;
  bool strict_zeros = false;  // OpenOptions::strict_zeros
  // Where the canonical packed codes of this projection go ([N, K/2] or [N, K] bytes inside the
  // stacked weight), or null. A reader whose format stores that packing up to a transpose writes
  // them there and sets Projection::codes_in_place instead of unpacking.
  uint8_t* codes_out = nullptr;
};

class FormatAdapter {
 public:
  virtual ~FormatAdapter() = default;
  // Suffix of the tensor whose presence marks a module as quantized in this format.
  virtual std::string_view packed_suffix() const = 0;
  // Name of the scales tensor (its dtype is the scheme's source_scale_dtype).
  virtual std::string_view scales_suffix() const = 0;
  virtual Projection read(const TensorStore& store, const ProjectionSpec& spec) const = 0;
  virtual void write(SafetensorsWriter& out, const ProjectionSpec& spec, const Projection& p,
                     const WriteOptions& options) const = 0;
  // config.json "quantization_config" for a checkpoint of this scheme.
  virtual ordered_json quantization_config(const QuantScheme& scheme,
                                           const WriteOptions& options) const = 0;
};

// The adapter registry.cpp lists for the format. moe_wna16 is a way of reading GPTQ/AWQ
// checkpoints, not a layout, and mxfp4 stores its experts fused: neither has one.
const FormatAdapter& adapter_for(CheckpointFormat stored_format);

// Shared by the adapters.
void check_group_divides(const ProjectionSpec& spec);
std::vector<std::byte> encode_floats(std::span<const float> values, StDType dtype,
                                     const std::string& tensor);
// Adds a float tensor stored as `options.scale_dtype`; a value that would round is an Error.
void add_floats(SafetensorsWriter& out, const std::string& name, std::vector<int64_t> shape,
                std::span<const float> values, const WriteOptions& options);
void add_bias(SafetensorsWriter& out, const ProjectionSpec& spec, const Projection& p,
              const WriteOptions& options);
std::vector<float> read_bias(const TensorStore& store, const ProjectionSpec& spec);

}  // namespace qmoe::format
