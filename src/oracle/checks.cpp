#include "oracle/checks.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <tuple>

namespace qmoe {

namespace {

using Reason = std::optional<std::string>;

template <class T, class Name>
std::string join(const std::vector<T>& items, Name name) {
  std::string text;
  for (const T& item : items) text += fmt::format("{}{}", text.empty() ? "" : ", ", name(item));
  return text.empty() ? std::string("none") : text;
}

template <class T>
bool contains(const std::vector<T>& items, const T& item) {
  return std::find(items.begin(), items.end(), item) != items.end();
}

std::string group_name(int g) {
  if (g == kChannelwise) return "channelwise";
  if (g == kAnyGroupDividingK) return "any group size dividing K";
  return fmt::format("{}", g);
}

std::string cc_name(int cc) { return fmt::format("sm_{}", cc); }

Reason check_device_kind(const BackendDescriptor& b, const LayerDesc&, const DeviceDesc& d) {
  if (b.device == d.kind) return std::nullopt;
  return fmt::format("runs on {}, not on {}", b.device == DeviceKind::cpu ? "the CPU" : "CUDA GPUs",
                     d.name);
}

Reason check_cpu_features(const BackendDescriptor& b, const LayerDesc&, const DeviceDesc& d) {
  if (d.kind != DeviceKind::cpu) return std::nullopt;
  for (CpuFeature f : b.cpu_features)
    if (!d.has(f)) return fmt::format("needs a CPU with {}; {} lacks it", name(f), d.name);
  return std::nullopt;
}

Reason check_compute_capability(const BackendDescriptor& b, const LayerDesc&, const DeviceDesc& d) {
  if (d.kind != DeviceKind::cuda) return std::nullopt;
  const int cc = d.compute_capability;
  const bool below = b.min_compute_capability > 0 && cc < b.min_compute_capability;
  const bool above = b.max_compute_capability > 0 && cc > b.max_compute_capability;
  if (!below && !above) return std::nullopt;
  std::string range = b.min_compute_capability == b.max_compute_capability
                          ? cc_name(b.min_compute_capability)
                      : b.max_compute_capability == 0
                          ? fmt::format("{} or newer", cc_name(b.min_compute_capability))
                          : fmt::format("{}..{}", cc_name(b.min_compute_capability),
                                        cc_name(b.max_compute_capability));
  return fmt::format("needs compute capability {}; {} is {}", range, d.name, cc_name(cc));
}

// One weight's scheme against the descriptor; `what` is "w13", "w2" or "weights" (both alike).
Reason check_scheme(const BackendDescriptor& b, const QuantScheme& s, int64_t K,
                    const std::string& what) {
  if (s.activation_quant != ActivationQuant::none && !b.mxfp4_activations) {
    return fmt::format(
        "{}: MXFP4 activations (W4A4) are emulated only: no FP4 tensor-core path here; ask for it "
        "with --backend emulation",
        what);
  }
  if (s.kind == WeightKind::mxfp4) {
    if (b.mxfp4) return std::nullopt;
    return fmt::format("{}: mxfp4 weights are not supported (supports {} only)", what,
                       join(b.int_bits, [](int x) { return fmt::format("int{}", x); }));
  }
  if (!contains(b.int_bits, s.bits)) {
    return fmt::format("{}: int{} weights are not supported (supports {})", what, s.bits,
                       join(b.int_bits, [](int x) { return fmt::format("int{}", x); }));
  }
  if (s.has_zero_points() && !b.zero_points) {
    return fmt::format(
        "{}: asymmetric weights (explicit zero points) are not supported; use a symmetric "
        "checkpoint or another backend",
        what);
  }
  const bool any_divisor = contains(b.group_sizes, kAnyGroupDividingK) &&
                           s.group_size != kChannelwise && K % s.group_size == 0 &&
                           s.group_size % b.group_multiple == 0;
  if (!any_divisor && !contains(b.group_sizes, s.group_size)) {
    const auto group_rule = [&](int g) {
      if (g == kAnyGroupDividingK && b.group_multiple > 1)
        return fmt::format("any multiple of {} dividing K", b.group_multiple);
      return group_name(g);
    };
    return fmt::format("{}: group size {} is not supported (supports {})", what,
                       group_name(s.group_size), join(b.group_sizes, group_rule));
  }
  if (b.group_fills_whole_bytes && s.group_size != kChannelwise && s.group_size * s.bits % 8 != 0) {
    return fmt::format("{}: a group of {} {}-bit codes does not fill whole bytes", what,
                       s.group_size, s.bits);
  }
  if (s.act_order && !b.act_order) {
    return fmt::format(
        "{}: act-order (g_idx, GPTQ desc_act) is not supported; use a checkpoint quantized "
        "without act-order",
        what);
  }
  return std::nullopt;
}

// The K that w2's groups divide: the whole K for an act-order shard that keeps full-K scales.
int64_t w2_scale_k(const LayerDesc& l) { return l.w2_full_k > 0 ? l.w2_full_k : l.intermediate; }

Reason check_weights(const BackendDescriptor& b, const LayerDesc& l, const DeviceDesc&) {
  if (l.w13_scheme == l.w2_scheme) {
    // Same scheme: report once, against the K that makes "dividing K" hardest to meet.
    if (Reason r = check_scheme(b, l.w13_scheme, l.hidden, "weights")) return r;
    return check_scheme(b, l.w2_scheme, w2_scale_k(l), "weights");
  }
  if (Reason r = check_scheme(b, l.w13_scheme, l.hidden, "w13")) return r;
  return check_scheme(b, l.w2_scheme, w2_scale_k(l), "w2");
}

Reason check_act_order_split(const BackendDescriptor& b, const LayerDesc& l, const DeviceDesc&) {
  if (l.w2_full_k == 0 || l.w2_full_k == l.intermediate || b.act_order_split_k) return std::nullopt;
  return fmt::format(
      "w2 is an act-order shard split on K ({} of {} channels, scales kept for the full K), which "
      "is not supported; use TP 1 (expert parallelism shards act-order layers fine)",
      l.intermediate, l.w2_full_k);
}

Reason check_act_order_groups(const BackendDescriptor& b, const LayerDesc& l, const DeviceDesc&) {
  if (!l.act_order_uneven_groups || b.act_order_uneven_groups) return std::nullopt;
  return std::string(
      "act-order groups of unequal size (some g_idx group holds other than group-size channels) "
      "are not supported; GPTQ's act-order gives equal groups");
}

Reason check_mxfp4_windows(const BackendDescriptor& b, const LayerDesc& l, const DeviceDesc&) {
  if (b.mxfp4_window_spread_limit < 0 || l.mxfp4_window_spread <= b.mxfp4_window_spread_limit)
    return std::nullopt;
  return fmt::format(
      "mxfp4: the scales of two 32-channel blocks in one 64-channel window differ by a factor "
      "2^{}; the kernel re-codes each window at one scale, exactly up to 2^{}",
      l.mxfp4_window_spread, b.mxfp4_window_spread_limit);
}

Reason check_activation(const BackendDescriptor& b, const LayerDesc& l, const DeviceDesc&) {
  if (contains(b.activations, l.activation)) return std::nullopt;
  return fmt::format("activation {} is not implemented (has {})", name(l.activation),
                     join(b.activations, [](Activation a) { return name(a); }));
}

Reason check_activation_dtype(const BackendDescriptor& b, const LayerDesc& l, const DeviceDesc&) {
  if (!l.activation_dtype) return std::nullopt;
  return unsupported_activation_dtype(b, *l.activation_dtype);
}

Reason check_activation_format(const BackendDescriptor& b, const LayerDesc& l, const DeviceDesc&) {
  if (contains(b.activation_formats, l.activation_format)) return std::nullopt;
  return fmt::format(
      "does not take the {} activation format (takes {}); MoEConfig::activation_format asks "
      "for it",
      name(l.activation_format),
      join(b.activation_formats, [](ActivationFormat f) { return name(f); }));
}

Reason check_bias(const BackendDescriptor& b, const LayerDesc& l, const DeviceDesc&) {
  if (!l.has_bias() || b.bias) return std::nullopt;
  return fmt::format("expert bias ({}) is not supported", l.w13_bias && l.w2_bias ? "w13 and w2"
                                                          : l.w13_bias            ? "w13"
                                                                                  : "w2");
}

Reason check_router_weight_on_input(const BackendDescriptor& b, const LayerDesc& l,
                                    const DeviceDesc&) {
  if (!l.apply_router_weight_on_input || b.router_weight_on_input) return std::nullopt;
  return std::string(
      "router weights applied on the input (apply_router_weight_on_input) are not "
      "supported");
}

// One GEMM [N, K] against the tile multiples.
Reason check_gemm_shape(const BackendDescriptor& b, const char* what, int64_t N, int64_t K) {
  if (N % b.n_multiple != 0)
    return fmt::format("{} is [N={}, K={}]: N must be a multiple of {} (tile)", what, N, K,
                       b.n_multiple);
  if (K % b.k_multiple != 0)
    return fmt::format("{} is [N={}, K={}]: K must be a multiple of {} (tile)", what, N, K,
                       b.k_multiple);
  return std::nullopt;
}

Reason check_tiles(const BackendDescriptor& b, const LayerDesc& l) {
  if (Reason r = check_gemm_shape(b, "w13", l.w13_rows(), l.hidden)) return r;
  return check_gemm_shape(b, "w2", l.hidden, l.intermediate);
}

Reason check_shapes(const BackendDescriptor& b, const LayerDesc& l, const DeviceDesc&) {
  if (Reason r = check_tiles(b, l)) return r;
  if (!b.group_multiple_of_k_tile) return std::nullopt;
  for (const QuantScheme* s : {&l.w13_scheme, &l.w2_scheme}) {
    // MXFP4's 32-blocks are the descriptor's `mxfp4` business (check_mxfp4_windows).
    if (s->kind == WeightKind::mxfp4) continue;
    if (s->group_size != kChannelwise && s->group_size % b.k_multiple != 0) {
      return fmt::format(
          "group size {} must be a multiple of the K tile ({}): a tile reads one "
          "scale per group",
          s->group_size, b.k_multiple);
    }
  }
  return std::nullopt;
}

Reason check_limits(const BackendDescriptor& b, const LayerDesc& l, const DeviceDesc&) {
  if (b.max_experts > 0 && l.num_experts > b.max_experts)
    return fmt::format("{} experts exceed its limit of {}; shard experts with EP", l.num_experts,
                       b.max_experts);
  if (b.max_top_k > 0 && l.top_k > b.max_top_k)
    return fmt::format("top-k {} exceeds its limit of {}", l.top_k, b.max_top_k);
  if (b.max_gemm_weights > 0) {
    for (auto [what, N, K] :
         {std::tuple{"w13", l.w13_rows(), l.hidden}, std::tuple{"w2", l.hidden, l.intermediate}}) {
      if (N * K > b.max_gemm_weights)
        return fmt::format(
            "{} is [N={}, K={}]: {} weights per expert exceed its limit of {}; shard the layer "
            "with TP",
            what, N, K, N * K, b.max_gemm_weights);
    }
  }
  return std::nullopt;
}

using Check = Reason (*)(const BackendDescriptor&, const LayerDesc&, const DeviceDesc&);

// Order: what cannot change (the device) before what the user could change (scheme,
// activation, bias, shapes).
constexpr std::array<Check, 14> kChecks{
    check_device_kind,
    check_cpu_features,
    check_compute_capability,
    check_weights,
    check_mxfp4_windows,
    check_act_order_split,
    check_act_order_groups,
    check_activation,
    check_activation_dtype,
    check_activation_format,
    check_bias,
    check_router_weight_on_input,
    check_shapes,
    check_limits,
};

}  // namespace

std::optional<std::string> unsupported_activation_dtype(const BackendDescriptor& b, DType dtype) {
  if (contains(b.activation_dtypes, dtype)) return std::nullopt;
  return fmt::format("{} activations are not supported (supports {}); convert hidden states",
                     name(dtype), join(b.activation_dtypes, [](DType t) { return name(t); }));
}

std::optional<std::string> first_failed_check(const BackendDescriptor& backend,
                                              const LayerDesc& layer, const DeviceDesc& device) {
  for (Check c : kChecks)
    if (Reason r = c(backend, layer, device)) return r;
  return std::nullopt;
}

}  // namespace qmoe
