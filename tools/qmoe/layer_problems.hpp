#pragma once
// The layers a command could not use: those that do not load and those config.json declares that
// no file holds. `run` and `explain` do what they can, print lines() and end with summary() as
// their one-line error (exit 1), as `verify` ends with its failed rows.
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "qmoe/checkpoint.hpp"

namespace qmoe::cli {

class LayerProblems {
 public:
  // `missing`: the declared MoE layers without experts in the files that the command wanted.
  explicit LayerProblems(std::vector<int> missing) : missing_(std::move(missing)) {}

  // The layer's experts, or nothing after noting why they do not load.
  std::optional<QuantizedExperts> load(const Checkpoint& ckpt, int layer);

  bool empty() const { return not_loading_.empty() && missing_.empty(); }
  // One line per problem: "layer 1 does not load: ...", "layers 2-3 are MoE layers by ...".
  std::vector<std::string> lines() const;
  // "layer 1 does not load; layers 2-3 are MoE layers by config.json but no file holds ..."
  std::string summary() const;

 private:
  std::vector<std::pair<int, std::string>> not_loading_;  // layer, why
  std::vector<int> missing_;
};

}  // namespace qmoe::cli
