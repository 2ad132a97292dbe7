#pragma once
// What `qmoe inspect` reports about a checkpoint: per MoE layer its shapes, bytes and anything
// suspicious, without stopping at the first bad layer.
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "format/gptq_zero_overflow.hpp"
#include "qmoe/checkpoint.hpp"

namespace qmoe::format {

// Of a layer that loaded, so every scale is finite (QuantizedWeight::validate refuses NaN / Inf).
struct WeightStats {
  std::vector<int64_t> shape;  // [E, N, K]
  int64_t zero_scales = 0;     // a zero scale silences its whole group
  int64_t nonfinite_bias = 0;
  float min_abs_scale = 0, max_abs_scale = 0;
};

struct LayerReport {
  int layer = 0;
  int64_t bytes = 0;  // on disk
  std::string error;  // why the layer does not load (missing expert, bad scale, ...); empty if ok
  WeightStats w13, w2;
  bool has_bias = false;
  // GPTQ v1 qzeros words whose zero point of 0 overwrote the zero points above it (lost, read as
  // 0), per expert projection and group (gptq_zero_overflow.hpp).
  std::vector<GroupZeroOverflow> zero_overflows;
};

struct CheckpointReport {
  std::string dir, format, model_type, naming, scheme, scale_dtype;
  MoEConfig moe;
  std::vector<LayerReport> layers;
  std::vector<std::string> findings;  // one line per suspicious thing, layer by layer
  // How many findings make the checkpoint unusable as it is: layers that do not load or are
  // missing (a NaN / Inf scale among them), NaN / Inf biases. (Zero scales and overflowed GPTQ zero
  // points are findings, but not problems: the layer runs; OpenOptions::strict_zeros refuses the
  // latter.)
  int64_t problems = 0;
};

// `layer_done`, when given, is called after each layer (for a progress display).
CheckpointReport inspect(const Checkpoint& checkpoint,
                         const std::function<void()>& layer_done = {});
nlohmann::ordered_json to_json(const CheckpointReport& report);

}  // namespace qmoe::format
