#include "layer_problems.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "qmoe/error.hpp"
#include "units.hpp"

namespace qmoe::cli {

namespace {

std::string missing_text(const std::vector<int>& layers) {
  if (layers.size() == 1)
    return fmt::format("layer {} is an MoE layer by config.json but no file holds its experts",
                       layers[0]);
  return fmt::format("layers {} are MoE layers by config.json but no file holds their experts",
                     number_ranges(layers));
}

}  // namespace

std::optional<QuantizedExperts> LayerProblems::load(const Checkpoint& ckpt, int layer) {
  try {
    return ckpt.load_layer(layer);
  } catch (const Error& e) {
    not_loading_.emplace_back(layer, e.what());
    return std::nullopt;
  }
}

std::vector<std::string> LayerProblems::lines() const {
  std::vector<std::string> lines;
  for (const auto& [layer, why] : not_loading_)
    lines.push_back(fmt::format("layer {} does not load: {}", layer, why));
  if (!missing_.empty()) lines.push_back(missing_text(missing_));
  return lines;
}

std::string LayerProblems::summary() const {
  std::vector<std::string> parts;
  std::vector<int> layers;
  for (const auto& [layer, why] : not_loading_) layers.push_back(layer);
  if (layers.size() == 1) parts.push_back(fmt::format("layer {} does not load", layers[0]));
  if (layers.size() > 1)
    parts.push_back(fmt::format("layers {} do not load", number_ranges(layers)));
  if (!missing_.empty()) parts.push_back(missing_text(missing_));
  return fmt::format("{}", fmt::join(parts, "; "));
}

}  // namespace qmoe::cli
