#pragma once
// The oracle: which backend runs a MoE layer on a device, and why every other one does not.
//
//   qmoe::Selection s = qmoe::select(qmoe::describe(experts, config), qmoe::host_cpu());
//   s.backend            -> "cpu"
//   s.verdicts           -> one line per backend: chosen, or the first check it failed
//
// Backends declare what they support in descriptors (data next to their code); the oracle walks
// them in the platform's priority order and holds no backend-specific rule of its own.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "qmoe/config.hpp"
#include "qmoe/device.hpp"
#include "qmoe/quant.hpp"

namespace qmoe {

// Everything about one (possibly sharded) MoE layer that decides which backend can run it.
struct LayerDesc {
  QuantScheme w13_scheme;
  QuantScheme w2_scheme;
  int64_t num_experts = 0;   // experts held by this layer (local experts of an EP rank)
  int64_t hidden = 0;        // H
  int64_t intermediate = 0;  // I of this shard
  int top_k = 1;
  Activation activation = Activation::silu;
  bool w13_bias = false;
  bool w2_bias = false;
  bool apply_router_weight_on_input = false;
  std::optional<DType> activation_dtype;  // dtype of hidden/out; unset = not known yet
  // The format the layer's forwards take (MoEConfig::activation_format): a backend must take it.
  ActivationFormat activation_format = ActivationFormat::standard;
  int tp_size = 1;
  int ep_size = 1;
  // Act-order w2 of a tensor-parallel shard keeps the scale table of the whole K (upstream's
  // "is_k_full = false"); this is that K, or 0 when w2's scales cover exactly its own K.
  int64_t w2_full_k = 0;
  // Some act-order group of some expert holds other than group-size channels (g_idx not from
  // GPTQ's act-order). Known only from the weights; describe(scheme, config) leaves it false.
  bool act_order_uneven_groups = false;
  // MXFP4 weights: the largest difference between the e8m0 exponents of two nonzero 32-blocks in
  // one aligned 64-channel window of a row, over both weights (what a kernel that reads one scale
  // per 64-channel tile must absorb into its codes). Known only from the weights; describe(scheme,
  // config) leaves it 0.
  int mxfp4_window_spread = 0;

  bool has_bias() const { return w13_bias || w2_bias; }
  int64_t w13_rows() const { return is_gated(activation) ? 2 * intermediate : intermediate; }
  // "int4 g128 asym act-order, E=128 H=2048 I=768 top-8 silu, bias" plus shard facts.
  std::string to_string() const;
};

// From the canonical weights of a layer (or a shard of one) and its config.
LayerDesc describe(const QuantizedExperts& experts, const MoEConfig& config);
// From metadata only (a checkpoint's scheme and config), without loading weights.
LayerDesc describe(const QuantScheme& scheme, const MoEConfig& config);

struct Verdict {
  std::string backend;
  std::string summary;  // what the backend is, in one line
  bool chosen = false;
  bool compatible = false;  // every check passed (chosen, or lower in priority, or opt-in only)
  std::string reason;       // why it was not chosen; empty for the chosen backend
  // The activation formats the backend's forwards take (its descriptor), standard first.
  std::vector<ActivationFormat> activation_formats;
};

// One backend of a plan and the batches it runs: from `from_tokens` tokens up to the next step's.
struct PlanStep {
  std::string backend;
  int64_t from_tokens = 1;
  std::string why;
  // What a large-batch step adds to the first step's weights, in bytes (from the shapes, before
  // anything is prepared); 0 for the first step, whose copy the layer needs anyway.
  // MoEConfig::large_batch_backend decides whether the MoE prepares it (config.hpp).
  int64_t weight_bytes = 0;
  // The first step's int4 codes that this step reads instead of a copy of its own (both hold
  // them in the same order), in bytes.
  int64_t shared_bytes = 0;
};

struct Selection {
  std::string backend;            // the chosen backend's registry name
  std::vector<Verdict> verdicts;  // every known backend: chosen first, then priority order
  // "auto" on a device with a large-batch backend (cuda-wgmma on sm_90): the chosen backend for
  // small batches, then that one from its crossover on; the MoE prepares both and picks per call.
  // Empty when `backend` runs every batch.
  std::vector<PlanStep> plan;
  // The chosen backend's prepared copy of the layer's weights, from the shapes, and how many of
  // its code bytes pad N and K to the backend's tiles (0 and 0 where it does not declare them).
  int64_t weight_bytes = 0;
  int64_t padding_bytes = 0;
  std::string error;  // evaluate() only: why no backend was chosen (then `backend` is empty)
};

// Whether a MoE without MoEConfig::large_batch_backend prepares the plan's large-batch step: when
// what the step adds is at most kLargeBatchExtraRatio of the first backend's bytes (or those are
// not known). False without a plan.
bool prepares_large_step_unasked(const Selection& s);

// One layer's weight bytes as a MoE without MoEConfig::large_batch_backend prepares them: the
// chosen backend's, plus what the large-batch step adds where prepares_large_step_unasked.
int64_t default_weight_bytes(const Selection& s);

// `preference` is "auto" (first compatible backend in the device's priority order; emulation is
// never picked automatically) or a backend name, which must pass every check: otherwise Error
// naming the failed check and the backends that would work. When no backend can run the layer
// the Error says what to change.
Selection select(const LayerDesc& layer, const DeviceDesc& device,
                 std::string_view preference = "auto");

// The same verdicts without throwing when nothing can run the layer (or the named backend
// cannot): then `backend` is empty and `error` holds what select() would throw. For explaining.
// An unknown backend name is still an Error.
Selection evaluate(const LayerDesc& layer, const DeviceDesc& device,
                   std::string_view preference = "auto");

// Every backend the oracle knows, built into this qmoe or not.
std::vector<std::string> known_backends();

}  // namespace qmoe
