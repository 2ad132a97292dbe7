#pragma once
// gpt-oss MXFP4 experts: all experts of a layer fused in 3-D tensors (no per-expert modules).
#include <string>

#include "format/safetensors.hpp"
#include "format/safetensors_writer.hpp"
#include "qmoe/checkpoint.hpp"

namespace qmoe::format {

// `prefix` is the layer's experts prefix, e.g. "model.layers.3.mlp.experts.".
QuantizedExperts read_mxfp4_layer(const TensorStore& store, const std::string& prefix,
                                  const MoEConfig& moe);
void write_mxfp4_layer(SafetensorsWriter& out, const std::string& prefix, const QuantizedExperts& x,
                       const WriteOptions& options);

}  // namespace qmoe::format
