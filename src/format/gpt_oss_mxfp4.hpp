#pragma once
// gpt-oss MXFP4 experts: all experts of a layer fused in 3-D tensors (no per-expert modules).
#include <string>

#include "format/safetensors.hpp"
#include "format/safetensors_writer.hpp"
#include "format/tensor_part.hpp"
#include "qmoe/checkpoint.hpp"

namespace qmoe::format {

// `prefix` is the layer's experts prefix, e.g. "model.layers.3.mlp.experts.". Experts `experts`
// of the layer and of each the intermediate channels `channels` (w13's gate and up rows of them,
// w2's K slice); w2's bias only with `w2_bias`. Reads only those rows and, for a K slice, the bytes
// of its blocks in each row (Checkpoint::load_experts).
QuantizedExperts read_mxfp4_experts(const TensorStore& store, const std::string& prefix,
                                    const MoEConfig& moe, Range experts, Range channels,
                                    bool w2_bias);
// The bytes read_mxfp4_experts reads, reading none.
int64_t mxfp4_experts_bytes(const TensorStore& store, const std::string& prefix,
                            const MoEConfig& moe, Range experts, Range channels, bool w2_bias);
void write_mxfp4_layer(SafetensorsWriter& out, const std::string& prefix, const QuantizedExperts& x,
                       const WriteOptions& options);

}  // namespace qmoe::format
