#pragma once
// The shape and behaviour of one MoE layer: experts, routing, activation, bias.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "qmoe/dtype.hpp"

namespace qmoe {

enum class Activation : uint8_t {
  silu,                    // silu(gate) * up
  gelu,                    // gelu_erf(gate) * up
  gelu_tanh,               // gelu_tanh(gate) * up
  swigluoai,               // interleaved [g0,u0,g1,u1,..]: (clamp(u)+1) * g' * sigmoid(alpha g')
  swigluoai_uninterleave,  // same math on de-interleaved halves: g' sigmoid(alpha g') (u' + beta)
  silu_no_mul,             // silu(x)
  gelu_no_mul,             // gelu_erf(x)
  gelu_tanh_no_mul,        // gelu_tanh(x)
  relu2_no_mul,            // relu(x)^2
};

bool is_gated(Activation a);
// Every activation qmoe implements, in declaration order.
const std::vector<Activation>& all_activations();
std::string_view name(Activation a);
// Accepts the names above plus common aliases ("gelu_pytorch_tanh", "swiglu"). Throws Error.
Activation parse_activation(std::string_view s);

// Parameters of the clamped SwiGLU variants (gpt-oss: alpha 1.702, limit 7, beta 1 built in).
struct ActivationParams {
  float alpha = 1.702f;
  float limit = 7.0f;
  float beta = 1.0f;  // only swigluoai_uninterleave reads it
};

// How a forward's activations are laid out. standard: tokens [M, H] with their routing
// (MoE::forward, forward_routed). batched_experts: [E, T_max, H] rows already grouped by local
// expert with a count per expert (DeepEP's low-latency dispatch, vLLM's batched experts;
// MoE::forward_batched).
enum class ActivationFormat : uint8_t { standard, batched_experts };
std::string_view name(ActivationFormat f);

enum class Scoring : uint8_t { softmax, sigmoid };
std::string_view name(Scoring s);

struct RoutingConfig {
  Scoring scoring = Scoring::softmax;
  int top_k = 2;
  bool renormalize = true;
  float routed_scaling_factor = 1.0f;
  int n_group = 0;     // grouped top-k (DeepSeek): number of groups; 0 = no grouping
  int topk_group = 0;  // groups kept
  std::vector<float> correction_bias;  // [E], added to scores for selection only; empty = none
};

struct MoEConfig {
  int64_t num_experts = 0;
  int64_t hidden = 0;        // H
  int64_t intermediate = 0;  // I (per shard)
  RoutingConfig routing;
  Activation activation = Activation::silu;
  ActivationParams activation_params;
  bool apply_router_weight_on_input = false;  // requires top_k == 1
  bool w13_bias = false;
  bool w2_bias = false;
  // dtype of hidden/out. When set, the oracle checks it as the MoE is built and every forward
  // must use it; unset, each forward checks its dtype against the chosen backend's.
  std::optional<DType> activation_dtype;
  // "auto" on a device with a large-batch backend (cuda-wgmma on sm_90) can prepare it too and run
  // batches from its crossover on with it (Selection::plan). Where the first backend's int4 codes
  // are in the order both read (int4 without act-order), the second reads them and adds only its
  // scales (and zero terms); elsewhere it needs a second copy of the weights in its layout. Unset:
  // prepared only when what it adds is at most kLargeBatchExtraRatio of the first's bytes, so the
  // default holds one copy of the codes (int8, act-order and MXFP4 second copies are opt-in: two
  // copies of gpt-oss-120b do not fit a 141 GB GPU). true: always; false: never.
  std::optional<bool> large_batch_backend;
  // The format this layer's forwards must be able to take: "auto" then picks a backend that
  // takes it, and a named backend that does not is an Error. Every backend takes standard.
  ActivationFormat activation_format = ActivationFormat::standard;

  int top_k() const { return routing.top_k; }
  int64_t w13_rows() const { return is_gated(activation) ? 2 * intermediate : intermediate; }
};

// MoEConfig::large_batch_backend unset: the most a large-batch backend may add to the first
// backend's bytes and still be prepared unasked (shared int4 codes add their scales: 3% at
// groups of 128, 9% with zero points, 17% with zero points at groups of 64).
inline constexpr double kLargeBatchExtraRatio = 0.25;

// Largest expert count and hidden / intermediate width validate() accepts.
inline constexpr int64_t kMaxExperts = int64_t{1} << 16;
inline constexpr int64_t kMaxWidth = int64_t{1} << 20;

// Throws Error naming the first inconsistent field (top-k > E, groups not dividing E, sizes
// beyond the limits above, ...).
void validate(const MoEConfig& config);

}  // namespace qmoe
