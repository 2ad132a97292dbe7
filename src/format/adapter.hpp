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
#include "format/tensor_part.hpp"
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
  // The part of the projection to read, for a tensor-parallel rank: output channels `out` and
  // input channels `in` of [N, K] (count 0: all of them). The cut must not split a packed word or
  // a quantization group; act-order scales and zero points are read whole (g_idx holds groups of
  // the whole K).
  Range out{}, in{};
  bool bias = true;  // read the module's bias, when it has one

  Range rows() const { return out.count > 0 ? out : Range{0, N}; }
  Range cols() const { return in.count > 0 ? in : Range{0, K}; }
  // The scale groups of cols(): all of them with act-order or channelwise scales.
  Range groups() const;
  // Throws Error naming the module unless rows() and cols() start and end on multiples of
  // `out_multiple` and `in_multiple` (a packed word, a block) or at the projection's end.
  void check_cut(int64_t out_multiple, int64_t in_multiple, const char* why) const;
};

class FormatAdapter {
 public:
  virtual ~FormatAdapter() = default;
  // Suffix of the tensor whose presence marks a module as quantized in this format.
  virtual std::string_view packed_suffix() const = 0;
  // Name of the scales tensor (its dtype is the scheme's source_scale_dtype).
  virtual std::string_view scales_suffix() const = 0;
  // Reads the part of one projection that `spec` asks for (all of it by default), reading only the
  // bytes of its tensors that hold it (counted by the store).
  Projection read(const TensorStore& store, const ProjectionSpec& spec) const;
  // Those parts of the module's stored tensors (its optional tensors where the store holds them).
  virtual std::vector<TensorPart> parts(const TensorStore& store,
                                        const ProjectionSpec& spec) const = 0;
  virtual void write(SafetensorsWriter& out, const ProjectionSpec& spec, const Projection& p,
                     const WriteOptions& options) const = 0;
  // config.json "quantization_config" for a checkpoint of this scheme.
  virtual ordered_json quantization_config(const QuantScheme& scheme,
                                           const WriteOptions& options) const = 0;

 protected:
  // Decodes spec's part of the projection from `parts`: the store read_parts made of parts(),
  // whose tensors have the parts' shapes.
  virtual Projection decode(const TensorStore& parts, const ProjectionSpec& spec) const = 0;
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
// The bias's part (rows()), when the module has a bias and spec.bias asks for it.
void add_bias_part(std::vector<TensorPart>& parts, const TensorStore& store,
                   const ProjectionSpec& spec);
std::vector<float> read_bias(const TensorStore& parts, const ProjectionSpec& spec);
// The dtypes scales and biases are stored in.
inline const std::vector<StDType> kFloatDTypes{StDType::f16, StDType::bf16, StDType::f32};

}  // namespace qmoe::format
