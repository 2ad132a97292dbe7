// libFuzzer target for config.json (src/format/model_config.cpp): any byte string must either
// give a model config whose MoE shape validates and whose scheme qmoe can represent, or be refused
// with qmoe::Error (or, for text that is not JSON, by the JSON parser, as read_model_config does).
// Anything else (a crash, a sanitizer report, another exception type) is a bug.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "format/model_config.hpp"
#include "qmoe/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  qmoe::format::ordered_json config;
  try {
    config = qmoe::format::ordered_json::parse(text);
  } catch (const qmoe::format::ordered_json::exception&) {
    return 0;  // not JSON, or a number out of range: read_model_config turns these into Error
  }
  try {
    const qmoe::format::ModelConfig m = qmoe::format::parse_model_config(config, "config.json");
    qmoe::validate(m.moe);
    qmoe::validate(m.quant.scheme);
    // Per-module overrides (GPTQ dynamic, AWQ modules_to_not_convert, CT targets) on the names a
    // checkpoint asks about.
    for (const char* module :
         {"model.layers.0.mlp.experts.0.gate_proj", "model.layers.1.mlp.experts.7.down_proj",
          "model.layers.0.mlp.gate", "lm_head"}) {
      if (const auto scheme = m.quant.scheme_for(module)) qmoe::validate(*scheme);
    }
  } catch (const qmoe::Error&) {
  }
  return 0;
}
