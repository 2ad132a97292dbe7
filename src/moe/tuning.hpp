#pragma once
// Crossovers measured by `qmoe tune`: from how many tokens a layer's large-batch backend
// (Selection::plan) runs, per device and layer, in a small JSON file that MoE reads when it is
// built. The file: QMOE_TUNE_FILE, else $XDG_CACHE_HOME/qmoe/tune.json, else
// $HOME/.cache/qmoe/tune.json.
//
//   {"version": 1, "entries": [{"device": "NVIDIA H200", "backend": "cuda-wgmma",
//     "layer": "int4 g128, E=128 H=2048 I=768 top-8 silu", "from_tokens": 512}]}
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

#include "qmoe/oracle.hpp"

namespace qmoe {

std::filesystem::path tune_file_path();

struct TunedCrossover {
  int64_t from_tokens = 0;
  std::string file;
};

// The entry for this device, layer and backend, or nullopt (no file, no entry). A file that is
// not a tune file is an Error naming it.
std::optional<TunedCrossover> tuned_crossover(const std::string& device_name,
                                              const LayerDesc& layer, const std::string& backend);

// Moves the plan's crossover (Selection::plan, step 2) to the tuned one for this device and layer
// when the tune file has it, and says so in the steps' `why`.
void apply_tuned_crossover(Selection& selection, const std::string& device_name,
                           const LayerDesc& layer);

// Adds or replaces the entry in `path` (made with its folder when missing).
void store_crossover(const std::filesystem::path& path, const std::string& device_name,
                     const LayerDesc& layer, const std::string& backend, int64_t from_tokens);

}  // namespace qmoe
