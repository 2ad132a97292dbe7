#pragma once
// config.json of a Hugging Face-style model directory: the MoE shape and routing, and the
// quantization config with the scheme it gives each module. Each format's quantization method
// reads its own quantization_config (quant_method.hpp, found through registry.hpp).
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "qmoe/checkpoint.hpp"
#include "qmoe/config.hpp"
#include "qmoe/quant.hpp"

namespace qmoe::format {

using ordered_json = nlohmann::ordered_json;

struct QuantConfig {
  CheckpointFormat format = CheckpointFormat::gptq;
  QuantScheme scheme;    // the method's default scheme (source_scale_dtype not yet known)
  int gptq_version = 1;  // GPTQ: "gptq" or absent -> 1 (qzeros hold z - 1), "gptq_v2" -> 2
  ordered_json raw;      // quantization_config as written

  // The scheme of a module (e.g. "model.layers.0.mlp.experts.3.gate_proj"), or nullopt when the
  // config leaves it unquantized (GPTQ dynamic "-:", AWQ modules_to_not_convert, CT ignore), by
  // the rules of the format's quantization method (quant_method.hpp).
  std::optional<QuantScheme> scheme_for(const std::string& module) const;
};

struct ModelConfig {
  std::string model_type;
  MoEConfig moe;
  QuantConfig quant;
  // The layers the config says are MoE layers (num_hidden_layers less the dense ones named by
  // first_k_dense_replace, moe_layer_freq, decoder_sparse_step, mlp_only_layers, or the explicit
  // moe_layers list); empty when the config does not say how many layers there are.
  std::vector<int> declared_moe_layers;
};

// Parses a config.json document; `file` names it in errors. The quantization parameters come from
// "quantization_config", or from `fallback_quant` (quantize_config.json) when that is absent.
ModelConfig parse_model_config(const ordered_json& config, std::string_view file,
                               const ordered_json* fallback_quant = nullptr);
// Reads dir/config.json (and dir/quantize_config.json when present).
ModelConfig read_model_config(const std::filesystem::path& dir);

}  // namespace qmoe::format
