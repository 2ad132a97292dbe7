#pragma once
// A quantization method: how one checkpoint format reads its config.json "quantization_config"
// (defaults and validation) and which scheme that config gives each module. Each format implements
// its method in its own file, next to its adapter; registry.cpp lists them.
#include <optional>
#include <string>
#include <string_view>

#include "format/model_config.hpp"

namespace qmoe::format {

class QuantMethod {
 public:
  virtual ~QuantMethod() = default;
  // The method's scheme and settings from quantization_config `q` (`file` names it in errors);
  // the caller sets format and raw.
  virtual QuantConfig parse(const ordered_json& q, std::string_view file) const = 0;
  // The scheme of `module` under `config` (parsed by this method), or nullopt when the config
  // leaves the module unquantized.
  virtual std::optional<QuantScheme> scheme_for(const QuantConfig& config,
                                                const std::string& module) const = 0;
};

// transformers' "modules_to_not_convert" of quantization_config `q` (AWQ and gpt-oss MXFP4): true
// when one of the listed names occurs anywhere in `module`.
bool not_converted(const ordered_json& q, const std::string& module);

}  // namespace qmoe::format
