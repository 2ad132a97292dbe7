#pragma once
// The layer `bench` and `tune` measure: the first MoE layer of a checkpoint directory, or a random
// layer of shape --shape H,I,E,TOPK with the --scheme flag's weights.
#include <cstdint>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>

#include "open_flags.hpp"
#include "qmoe/config.hpp"
#include "qmoe/quant.hpp"

namespace qmoe::cli {

struct LayerSource {
  std::string dir;
  std::string shape;  // "H,I,E,TOPK"; empty with no dir: 2048,768,32,8
  std::string scheme = "int4-g128";
  OpenFlags open;
  uint64_t seed = 2026;
};

struct BenchLayer {
  std::string source;  // for reports: "DIR layer L" or "random int4 g128 layer"
  MoEConfig config;
  std::optional<QuantizedExperts> experts;
};

// DIR, --shape, --scheme, --moe-wna16 and --seed.
void add_layer_flags(CLI::App& cmd, LayerSource& source);

// Usage errors for bad flags (a shape that is not four positive integers, a group that does not
// divide H and I, both a directory and a shape).
BenchLayer make_bench_layer(const LayerSource& from);

}  // namespace qmoe::cli
