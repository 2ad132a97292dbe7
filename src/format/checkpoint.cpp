#include "qmoe/checkpoint.hpp"

#include <fmt/ranges.h>

#include "core/check.hpp"
#include "format/adapter.hpp"
#include "format/expert_names.hpp"
#include "format/gpt_oss_mxfp4.hpp"
#include "format/model_config.hpp"
#include "format/parallel.hpp"
#include "format/safetensors.hpp"
#include "format/tensor_read.hpp"

namespace qmoe {

using format::Role;

namespace {

// vLLM's moe_wna16 method (quantization/moe_wna16.py `is_moe_wna16_compatible`) takes GPTQ
// without desc_act at 4 or 8 bits (sym or asym, any group size) and AWQ at 4 bits. Unlike vLLM,
// which always adds 1 to GPTQ zeros, the zero-point convention of the checkpoint's format field
// (gptq / gptq_v2) is honoured.
void check_moe_wna16(const format::QuantConfig& q, const std::string& config) {
  check(q.format == CheckpointFormat::gptq || q.format == CheckpointFormat::awq,
        "{}: moe_wna16 reads GPTQ or AWQ checkpoints, this one is {}", config, name(q.format));
  check(!q.scheme.act_order,
        "{}: moe_wna16 reads GPTQ only without desc_act (it has no g_idx); open it as gptq",
        config);
}

}  // namespace

struct Checkpoint::Impl {
  std::filesystem::path dir;
  format::ModelConfig config;
  format::TensorStore store;
  format::ExpertLayout layout;
  CheckpointFormat kind = CheckpointFormat::gptq;
  QuantScheme scheme;
  bool strict_zeros = false;

  const format::FormatAdapter& adapter() const { return format::adapter_for(config.quant.format); }
  std::vector<Role> roles() const {
    if (is_gated(config.moe.activation)) return {Role::gate, Role::up, Role::down};
    return {Role::up, Role::down};
  }
  // The scheme of one expert module, with the dtype its scales are stored in.
  QuantScheme module_scheme(const std::string& module, int layer) const;
  // One expert module's part of a slice: its rows `out` and columns `in`, its bias when `bias`.
  struct ModulePart {
    Role role = Role::up;
    format::Range out, in;
    bool bias = true;
  };
  // The modules' parts a slice reads of each expert, w13's in the order their rows stack.
  std::vector<ModulePart> module_parts(format::Range channels, bool w2_bias) const;
  // What the adapter reads of one expert's module part (scheme `s`, as the layer's first module).
  format::ProjectionSpec spec_of(int layer, int64_t expert, const ModulePart& part,
                                 const QuantScheme& s) const;
  format::Projection read(const format::ProjectionSpec& spec) const;
  // The slice's channels of I (all for channels 0), after checking its ranges.
  format::Range channels_of(const ExpertSlice& slice) const;
  void check_router(int layer) const;
  void require_layer(int layer) const;
  std::vector<int> layers() const;
};

std::vector<int> Checkpoint::Impl::layers() const {
  std::vector<int> out;
  for (const auto& [layer, count] : layout.experts_per_layer) out.push_back(layer);
  return out;
}

void Checkpoint::Impl::require_layer(int layer) const {
  check(layout.experts_per_layer.count(layer) == 1, "{}: layer {} has no experts (MoE layers: {})",
        dir.string(), layer, fmt::join(layers(), ", "));
}

QuantScheme Checkpoint::Impl::module_scheme(const std::string& module, int layer) const {
  const std::optional<QuantScheme> s = config.quant.scheme_for(module);
  const std::string packed = module + "." + std::string(adapter().packed_suffix());
  check(s.has_value(),
        "layer {}: expert module '{}' is left unquantized by the quantization config (ignore / "
        "modules_to_not_convert / dynamic); qmoe reads quantized experts only",
        layer, module);
  if (!store.find(packed)) {
    check(store.find(module + ".weight") == nullptr,
          "layer {}: expert module '{}' is stored unquantized ('{}.weight'); qmoe reads quantized "
          "experts only",
          layer, module, module);
    fail("layer {}: expert module '{}' is missing ({} has no '{}')", layer, module, dir.string(),
         packed);
  }
  QuantScheme out = *s;
  const format::TensorInfo& scales =
      store.at(module + "." + std::string(adapter().scales_suffix()));
  if (out.kind == WeightKind::mxfp4) {
    check(scales.dtype == format::StDType::u8,
          "tensor '{}' holds MXFP4 scales, so it must be U8 (e8m0), got {}", scales.name,
          scales.describe());
    return out;
  }
  const std::optional<DType> dtype = format::to_dtype(scales.dtype);
  check(dtype && (*dtype == DType::f16 || *dtype == DType::bf16 || *dtype == DType::f32),
        "tensor '{}' holds scales, so it must be F16, BF16 or F32, got {}", scales.name,
        scales.describe());
  out.source_scale_dtype = *dtype;
  return out;
}

std::vector<Checkpoint::Impl::ModulePart> Checkpoint::Impl::module_parts(format::Range channels,
                                                                         bool w2_bias) const {
  const int64_t H = config.moe.hidden, I = config.moe.intermediate;
  const bool gated = is_gated(config.moe.activation);
  std::vector<ModulePart> parts;
  // Canonical w13 rows are [gate; up] (only up when not gated): a range of them may cross from
  // the gate module into the up module.
  for (format::Range r : format::w13_row_ranges(config.moe.activation, I, channels)) {
    while (r.count > 0) {
      const bool gate = gated && r.first < I;
      const int64_t first = gate || !gated ? r.first : r.first - I;
      const int64_t count = gate ? std::min(r.count, I - r.first) : r.count;
      parts.push_back({gate ? Role::gate : Role::up, {first, count}, {0, H}, true});
      r = {r.first + count, r.count - count};
    }
  }
  parts.push_back({Role::down, {0, H}, channels, w2_bias});
  return parts;
}

format::ProjectionSpec Checkpoint::Impl::spec_of(int layer, int64_t expert, const ModulePart& part,
                                                 const QuantScheme& s) const {
  const std::string module = layout.expert_module(layer, expert, part.role);
  const QuantScheme actual = module_scheme(module, layer);
  check(actual == s,
        "layer {}: module '{}' is {} but the layer's first module is {}; one layer "
        "holds one scheme",
        layer, module, to_string(actual), to_string(s));
  const bool down = part.role == Role::down;
  return format::ProjectionSpec{.module = module,
                                .N = down ? config.moe.hidden : config.moe.intermediate,
                                .K = down ? config.moe.intermediate : config.moe.hidden,
                                .scheme = s,
                                .gptq_version = config.quant.gptq_version,
                                .strict_zeros = strict_zeros,
                                .out = part.out,
                                .in = part.in,
                                .bias = part.bias};
}

format::Projection Checkpoint::Impl::read(const format::ProjectionSpec& spec) const {
  format::Projection p = adapter().read(store, spec);
  // Converted: the file's pages of this module are not needed again (they stay in the page
  // cache), so they leave this process's memory.
  store.release_pages(spec.module + ".");
  return p;
}

// A router stored quantized would be dequantized and used by a loader that trusts it; upstream
// that gave wrong expert choices (vLLM #41426). The router must stay in float.
void Checkpoint::Impl::check_router(int layer) const {
  for (const std::string& router : layout.router_modules(layer)) {
    for (std::string_view suffix :
         {"qweight", "weight_packed", "qzeros", "scales", "weight_scale", "weight_blocks"}) {
      const std::string tensor = router + "." + std::string(suffix);
      check(store.find(tensor) == nullptr,
            "layer {}: the router '{}' is stored quantized ('{}'); the router must stay in float, "
            "so qmoe refuses it rather than route with degraded logits",
            layer, router, tensor);
    }
  }
}

Checkpoint::Checkpoint(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Checkpoint::Checkpoint(Checkpoint&&) noexcept = default;
Checkpoint& Checkpoint::operator=(Checkpoint&&) noexcept = default;
Checkpoint::~Checkpoint() = default;

Checkpoint Checkpoint::open(const std::filesystem::path& dir, const OpenOptions& options) {
  auto impl = std::make_unique<Impl>();
  impl->dir = dir;
  impl->config = format::read_model_config(dir);
  impl->kind = impl->config.quant.format;
  impl->strict_zeros = options.strict_zeros;
  if (options.as_moe_wna16) {
    check_moe_wna16(impl->config.quant, (dir / "config.json").string());
    impl->kind = CheckpointFormat::moe_wna16;
  }
  impl->store = format::TensorStore::open(dir);
  impl->layout = format::find_experts(impl->store);
  for (const auto& [layer, count] : impl->layout.experts_per_layer) {
    check(count <= impl->config.moe.num_experts,
          "{}: layer {} has tensors for expert {} but config.json says {} experts", dir.string(),
          layer, count - 1, impl->config.moe.num_experts);
  }
  const int first = impl->layout.experts_per_layer.begin()->first;
  MoEConfig& moe = impl->config.moe;
  const bool fused = impl->layout.naming == ExpertNaming::gpt_oss;
  check(fused == (impl->kind == CheckpointFormat::mxfp4),
        "{}: {} checkpoints store {} experts, but the tensors are {}", dir.string(),
        name(impl->kind), impl->kind == CheckpointFormat::mxfp4 ? "fused" : "per-expert",
        fused ? "fused" : "per expert");
  if (fused) {
    impl->scheme = impl->config.quant.scheme;
    const std::string prefix = impl->layout.experts_prefix(first);
    moe.w13_bias = impl->store.find(prefix + "gate_up_proj_bias") != nullptr;
    moe.w2_bias = impl->store.find(prefix + "down_proj_bias") != nullptr;
  } else {
    const std::string w13 = impl->layout.expert_module(first, 0, impl->roles().front());
    impl->scheme = impl->module_scheme(w13, first);
    moe.w13_bias = impl->store.find(w13 + ".bias") != nullptr;
    moe.w2_bias =
        impl->store.find(impl->layout.expert_module(first, 0, Role::down) + ".bias") != nullptr;
  }
  return Checkpoint(std::move(impl));
}

const std::filesystem::path& Checkpoint::dir() const { return impl_->dir; }
CheckpointFormat Checkpoint::format_kind() const { return impl_->kind; }
const QuantScheme& Checkpoint::scheme() const { return impl_->scheme; }
const MoEConfig& Checkpoint::moe_config() const { return impl_->config.moe; }
ExpertNaming Checkpoint::naming() const { return impl_->layout.naming; }
std::string_view Checkpoint::model_type() const { return impl_->config.model_type; }

std::vector<int> Checkpoint::moe_layers() const { return impl_->layers(); }

std::vector<int> Checkpoint::missing_layers() const {
  std::vector<int> missing;
  for (int layer : impl_->config.declared_moe_layers)
    if (impl_->layout.experts_per_layer.count(layer) == 0) missing.push_back(layer);
  return missing;
}

namespace {

// Bytes of the stored tensors whose names start with `prefix`.
int64_t bytes_under(const format::TensorStore& store, const std::string& prefix) {
  int64_t bytes = 0;
  for (auto it = store.tensors().lower_bound(prefix);
       it != store.tensors().end() && it->first.compare(0, prefix.size(), prefix) == 0; ++it)
    bytes += static_cast<int64_t>(it->second.bytes.size());
  return bytes;
}

}  // namespace

int64_t Checkpoint::layer_bytes(int layer) const {
  return bytes_under(impl_->store, impl_->layout.experts_prefix(layer));
}

MoEConfig Checkpoint::layer_config(int layer) const {
  const Impl& m = *impl_;
  m.require_layer(layer);
  MoEConfig config = m.config.moe;
  const std::string bias = m.layout.router_modules(layer).front() + ".e_score_correction_bias";
  if (const format::TensorInfo* t = m.store.find(bias)) {
    config.routing.correction_bias = format::read_floats(*t, config.num_experts);
  }
  return config;
}

QuantizedExperts Checkpoint::load_layer(int layer) const {
  return load_experts(layer, 0, impl_->config.moe.num_experts);
}
format::Range Checkpoint::Impl::channels_of(const ExpertSlice& slice) const {
  const int64_t E = config.moe.num_experts, I = config.moe.intermediate;
  const int64_t first = slice.first_expert, count = slice.num_experts;
  check(first >= 0 && count >= 1 && first <= E && count <= E - first,
        "experts [{}, {}) are not a range of this layer's {} experts (valid: 0 <= first, "
        "1 <= count, first + count <= {})",
        first, first + count, E, E);
  if (slice.first_channel == 0 && slice.channels == 0) return {0, I};
  check(slice.first_channel >= 0 && slice.channels >= 1 && slice.first_channel <= I &&
            slice.channels <= I - slice.first_channel,
        "intermediate channels [{}, {}) are not a range of this layer's I = {} (valid: 0 <= "
        "first_channel, 1 <= channels, first_channel + channels <= {}; channels 0 for all)",
        slice.first_channel, slice.first_channel + slice.channels, I, I);
  return {slice.first_channel, slice.channels};
}

QuantizedExperts Checkpoint::load_experts(int layer, int64_t first, int64_t count) const {
  return load_experts(layer, ExpertSlice{.first_expert = first, .num_experts = count});
}

int64_t Checkpoint::experts_bytes(int layer, int64_t first, int64_t count) const {
  return experts_bytes(layer, ExpertSlice{.first_expert = first, .num_experts = count});
}

QuantizedExperts Checkpoint::load_experts(int layer, const ExpertSlice& slice) const {
  const Impl& m = *impl_;
  m.require_layer(layer);
  m.check_router(layer);
  const format::Range channels = m.channels_of(slice);
  const format::Range experts{slice.first_expert, slice.num_experts};
  const MoEConfig& c = m.config.moe;
  if (m.layout.naming == ExpertNaming::gpt_oss) {
    return format::read_mxfp4_experts(m.store, m.layout.experts_prefix(layer), c, experts, channels,
                                      slice.w2_bias);
  }
  const std::vector<Impl::ModulePart> parts = m.module_parts(channels, slice.w2_bias);
  const QuantScheme s =
      m.module_scheme(m.layout.expert_module(layer, experts.first, parts.front().role), layer);
  const int64_t w13_rows = is_gated(c.activation) ? 2 * channels.count : channels.count;
  // A K-split act-order w2 keeps the scales of the whole K (its g_idx holds groups of it).
  const int64_t w2_full_k = s.act_order && channels.count < c.intermediate ? c.intermediate : 0;
  QuantizedWeight w13 = format::allocate_stacked(experts.count, w13_rows, c.hidden, s, c.w13_bias);
  QuantizedWeight w2 = format::allocate_stacked(experts.count, c.hidden, channels.count, s,
                                                c.w2_bias && slice.w2_bias, w2_full_k);
  const std::string what = fmt::format("layer {}", layer);
  // Experts convert in parallel, each straight into its rows of the stacked weights.
  format::for_each_index(experts.count, [&](int64_t i) {
    int64_t row0 = 0;
    int w13_part = 0;
    for (const Impl::ModulePart& part : parts) {
      const bool down = part.role == Role::down;
      QuantizedWeight& w = down ? w2 : w13;
      format::ProjectionSpec spec = m.spec_of(layer, experts.first + i, part, s);
      spec.codes_out = format::stacked_codes(w, i, down ? 0 : row0);
      format::put_projection(w, i, down ? 0 : row0, down ? 0 : w13_part++, m.read(spec),
                             what + (down ? " w2" : " w13"));
      if (!down) row0 += part.out.count;
    }
  });
  return QuantizedExperts(std::move(w13), std::move(w2));
}

int64_t Checkpoint::experts_bytes(int layer, const ExpertSlice& slice) const {
  const Impl& m = *impl_;
  m.require_layer(layer);
  const format::Range channels = m.channels_of(slice);
  const format::Range experts{slice.first_expert, slice.num_experts};
  if (m.layout.naming == ExpertNaming::gpt_oss) {
    return format::mxfp4_experts_bytes(m.store, m.layout.experts_prefix(layer), m.config.moe,
                                       experts, channels, slice.w2_bias);
  }
  const std::vector<Impl::ModulePart> parts = m.module_parts(channels, slice.w2_bias);
  const QuantScheme s =
      m.module_scheme(m.layout.expert_module(layer, experts.first, parts.front().role), layer);
  int64_t bytes = 0;
  for (int64_t e = experts.first; e < experts.end(); ++e) {
    for (const Impl::ModulePart& part : parts) {
      const format::ProjectionSpec spec = m.spec_of(layer, e, part, s);
      for (const format::TensorPart& t : m.adapter().parts(m.store, spec))
        bytes += m.store.part_bytes(t);
    }
  }
  return bytes;
}

int64_t Checkpoint::bytes_read() const { return impl_->store.bytes_read(); }

}  // namespace qmoe
