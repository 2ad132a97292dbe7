#include "qmoe/moe.hpp"

#include <algorithm>
#include <memory>
#include <utility>

#include "backend/backend.hpp"
#include "core/check.hpp"
#include "core/convert.hpp"
#include "moe/tuning.hpp"
#include "oracle/checks.hpp"
#include "route/routing_contract.hpp"

namespace qmoe {

namespace {

// Device, layout and data of a tensor whose shape was checked.
void check_placed(const TensorView& t, const char* what, Device device) {
  check(t.device() == device, "{} is on {} but the MoE runs on {}", what, to_string(t.device()),
        to_string(device));
  check(t.is_contiguous(), "{} must be contiguous (row-major), got {}", what, t.describe());
  check(t.data() != nullptr || t.numel() == 0, "{} has no data", what);
}

void check_tensor(const TensorView& t, const char* what, Device device, int64_t rows,
                  int64_t cols) {
  check(t.rank() == 2 && t.dim(0) == rows && t.dim(1) == cols, "{} must be [{}, {}], got {}", what,
        rows, cols, t.describe());
  check_placed(t, what, device);
}

bool takes_batched(const Backend& backend) {
  const BackendDescriptor* d = find_descriptor(backend.name());
  return d && std::ranges::find(d->activation_formats, ActivationFormat::batched_experts) !=
                  d->activation_formats.end();
}

std::string backends_taking_batched() {
  std::string list;
  for (const BackendDescriptor* d : all_descriptors())
    if (std::ranges::find(d->activation_formats, ActivationFormat::batched_experts) !=
        d->activation_formats.end())
      list += fmt::format("{}{}", list.empty() ? "" : ", ", d->name);
  return list;
}

bool wants_second_layout(const MoEConfig& config, const Selection& s) {
  if (config.large_batch_backend) return *config.large_batch_backend;
  return prepares_large_step_unasked(s);
}

const Backend* resolve(const std::string& name) {
  const Backend* b = find_backend(name);
  if (!b) {
    std::string built;
    for (const Backend* x : built_backends()) built += fmt::format(" {}", x->name());
    fail("backend '{}' is not built into this qmoe (built:{})", name, built);
  }
  return b;
}

}  // namespace

MoE::MoE(MoEConfig config, const QuantizedExperts& experts, const std::string& backend,
         Device device)
    : config_(std::move(config)), device_(device) {
  const LayerDesc layer = select_backend(experts, backend);
  prepared_ = backend_->prepare(experts, config_, device_);
  prepare_large_batch_backend(experts, layer);
}

MoE::MoE(MoEConfig config, QuantizedExperts&& experts, const std::string& backend, Device device)
    : config_(std::move(config)), device_(device) {
  const LayerDesc layer = select_backend(experts, backend);
  if (!keeps_plan()) {
    prepared_ = backend_->prepare_owned(std::move(experts), config_, device_);
    return;
  }
  // The large-batch backend is prepared beside the first (it may read its codes), from the
  // canonical weights, which are freed only after both.
  prepared_ = backend_->prepare(experts, config_, device_);
  prepare_large_batch_backend(experts, layer);
}

LayerDesc MoE::select_backend(const QuantizedExperts& experts, const std::string& backend) {
  validate(config_);
  check_experts_match_config(config_, experts);
  LayerDesc layer = describe(experts, config_);
  // The oracle decides for "auto" and checks a named backend, on the device the MoE runs on
  // (queried, not assumed: the host CPU's real features, the real CUDA device). A named backend
  // that fails a check is an error naming the check, never a silent fallback.
  selection_ = select(layer, query_device(device_), backend);
  backend_ = resolve(selection_.backend);
  return layer;
}

bool MoE::keeps_plan() {
  if (selection_.plan.size() != 2 || !wants_second_layout(config_, selection_))
    selection_.plan.clear();
  return !selection_.plan.empty();
}

void MoE::prepare_large_batch_backend(const QuantizedExperts& experts, const LayerDesc& layer) {
  if (!keeps_plan()) return;
  apply_tuned_crossover(selection_, query_device(device_).name, layer);
  const PlanStep& large = selection_.plan[1];
  large_backend_ = resolve(large.backend);
  large_prepared_ = large_backend_->prepare_beside(experts, config_, device_, *prepared_);
  large_from_tokens_ = large.from_tokens;
  large_dtype_ = config_.activation_dtype.value_or(DType::bf16);
}

MoE::~MoE() = default;
MoE::MoE(MoE&&) noexcept = default;
// Not the member-wise default: that would assign prepared_ first and free the codes the old
// large-batch layer may still point at. Destroying *this first keeps ~MoE's order.
MoE& MoE::operator=(MoE&& other) noexcept {
  if (this != &other) {
    std::destroy_at(this);
    std::construct_at(this, std::move(other));
  }
  return *this;
}

std::string_view MoE::backend_name() const { return backend_->name(); }

MoE::Runner MoE::runner_for(int64_t tokens, DType dtype) const {
  if (large_backend_ && tokens >= large_from_tokens_ && dtype == large_dtype_)
    return {large_backend_, large_prepared_.get()};
  return {backend_, prepared_.get()};
}

std::string_view MoE::backend_for(int64_t tokens, DType dtype) const {
  return runner_for(tokens, dtype).backend->name();
}

int64_t MoE::check_hidden_and_out(const TensorView& hidden, const TensorView& out) const {
  check(hidden.rank() == 2, "hidden must be [M, H], got {}", hidden.describe());
  const int64_t M = hidden.dim(0);
  check_tensor(hidden, "hidden", device_, M, config_.hidden);
  check(is_float_activation(hidden.dtype()), "hidden must be f32, f16 or bf16, got {}",
        name(hidden.dtype()));
  check_tensor(out, "out", device_, M, config_.hidden);
  check(out.dtype() == hidden.dtype(), "out must have the dtype of hidden ({}), got {}",
        name(hidden.dtype()), name(out.dtype()));
  check_activation_dtype(hidden.dtype(), *backend_);
  return M;
}

void MoE::check_activation_dtype(DType dtype, const Backend& backend) const {
  if (config_.activation_dtype) {
    check(dtype == *config_.activation_dtype,
          "hidden is {} but this MoE was built for {} activations (MoEConfig::activation_dtype)",
          name(dtype), name(*config_.activation_dtype));
  } else if (const BackendDescriptor* d = find_descriptor(backend.name())) {
    if (auto reason = unsupported_activation_dtype(*d, dtype))
      fail("backend '{}': {}", backend.name(), *reason);
  }
}

MoE::Runner MoE::batched_runner() const {
  if (takes_batched(*backend_)) return {backend_, prepared_.get()};
  if (large_backend_ && takes_batched(*large_backend_))
    return {large_backend_, large_prepared_.get()};
  fail(
      "forward_batched: backend '{}' does not take the batched_experts activation format; "
      "backends that do: {} (MoEConfig::activation_format = batched_experts makes \"auto\" pick "
      "one)",
      backend_name(), backends_taking_batched());
}

void MoE::reserve(int64_t max_tokens, void* stream) const {
  check(max_tokens >= 1, "reserve: max_tokens must be at least 1, got {}", max_tokens);
  backend_->reserve(*prepared_, max_tokens, stream);
  if (large_backend_ && max_tokens >= large_from_tokens_)
    large_backend_->reserve(*large_prepared_, max_tokens, stream);
}

void MoE::forward(TensorView hidden, TensorView router_logits, TensorView out, void* stream) const {
  const int64_t M = check_hidden_and_out(hidden, out);
  check_tensor(router_logits, "router_logits", device_, M, config_.num_experts);
  check(router_logits.dtype() == DType::f32, "router_logits must be f32, got {}",
        name(router_logits.dtype()));
  if (M == 0) return;
  if (device_.kind == DeviceKind::cpu)
    check_router_logits(router_logits.data_as<const float>(), M, config_.num_experts);
  const Runner r = runner_for(M, hidden.dtype());
  r.backend->forward(*r.prepared, config_, hidden, router_logits, out, stream);
}

void MoE::forward_routed(TensorView hidden, TensorView topk_weights, TensorView topk_ids,
                         TensorView out, void* stream) const {
  const int64_t M = check_hidden_and_out(hidden, out), k = config_.top_k();
  check_tensor(topk_weights, "topk_weights", device_, M, k);
  check(topk_weights.dtype() == DType::f32, "topk_weights must be f32, got {}",
        name(topk_weights.dtype()));
  check_tensor(topk_ids, "topk_ids", device_, M, k);
  check(topk_ids.dtype() == DType::i32, "topk_ids must be i32, got {}", name(topk_ids.dtype()));
  if (M == 0) return;
  if (device_.kind == DeviceKind::cpu) {
    check_routed_input(topk_ids.data_as<const int32_t>(), topk_weights.data_as<const float>(), M, k,
                       config_.num_experts);
  }
  const Runner r = runner_for(M, hidden.dtype());
  r.backend->run(*r.prepared, config_, RoutedBatch{hidden, topk_weights, topk_ids, out, stream});
}

void MoE::forward_batched(TensorView x, TensorView counts, TensorView out, void* stream) const {
  const Runner r = batched_runner();
  const int64_t E = config_.num_experts, H = config_.hidden;
  check(x.rank() == 3 && x.dim(0) == E && x.dim(2) == H,
        "forward_batched: x must be [E={}, T_max, H={}], got {}", E, H, x.describe());
  check_placed(x, "x", device_);
  check(is_float_activation(x.dtype()), "forward_batched: x must be f32, f16 or bf16, got {}",
        name(x.dtype()));
  check_activation_dtype(x.dtype(), *r.backend);
  check(out.rank() == 3 && out.dim(0) == E && out.dim(1) == x.dim(1) && out.dim(2) == H,
        "forward_batched: out must be [{}, {}, {}] like x, got {}", E, x.dim(1), H, out.describe());
  check_placed(out, "out", device_);
  check(out.dtype() == x.dtype(), "forward_batched: out must have the dtype of x ({}), got {}",
        name(x.dtype()), name(out.dtype()));
  check(counts.rank() == 1 && counts.dim(0) == E, "forward_batched: counts must be [E={}], got {}",
        E, counts.describe());
  check_placed(counts, "counts", device_);
  check(counts.dtype() == DType::i32, "forward_batched: counts must be i32, got {}",
        name(counts.dtype()));
  r.backend->run_batched(*r.prepared, config_, BatchedBatch{x, counts, out, stream});
}

}  // namespace qmoe
