#include "backend/backend.hpp"

#include <vector>

#include "core/check.hpp"
#include "route/topk.hpp"

namespace qmoe {

void check_experts_match_config(const MoEConfig& c, const QuantizedExperts& x) {
  check(x.num_experts() == c.num_experts && x.hidden() == c.hidden &&
            x.intermediate() == c.intermediate,
        "experts are [E={}, H={}, I={}] but the MoE config says [E={}, H={}, I={}]",
        x.num_experts(), x.hidden(), x.intermediate(), c.num_experts, c.hidden, c.intermediate);
  check(x.gated() == is_gated(c.activation),
        "activation {} is {}gated but w13 has {} rows for I = {}", name(c.activation),
        is_gated(c.activation) ? "" : "not ", x.w13().N, x.intermediate());
  check(x.w13().has_bias() == c.w13_bias && x.w2().has_bias() == c.w2_bias,
        "bias flags (w13 {}, w2 {}) disagree with the experts (w13 {}, w2 {})", c.w13_bias,
        c.w2_bias, x.w13().has_bias(), x.w2().has_bias());
}

void Backend::route(const MoEConfig& config, TensorView router_logits, TensorView topk_weights,
                    TensorView topk_ids, void* /*stream*/) const {
  check(router_logits.device().kind == DeviceKind::cpu,
        "backend '{}' routes on the host but router_logits is on {}", name(),
        to_string(router_logits.device()));
  route_topk(config.routing, router_logits.data_as<const float>(), router_logits.dim(0),
             router_logits.dim(1), topk_weights.data_as<float>(), topk_ids.data_as<int32_t>());
}

void Backend::forward(const PreparedExperts& prepared, const MoEConfig& config, TensorView hidden,
                      TensorView router_logits, TensorView out, void* stream) const {
  const int64_t M = hidden.dim(0), k = config.top_k();
  std::vector<float> weights(static_cast<size_t>(M * k));
  std::vector<int32_t> ids(static_cast<size_t>(M * k));
  TensorView weights_view(weights.data(), DType::f32, {M, k});
  TensorView ids_view(ids.data(), DType::i32, {M, k});
  route(config, router_logits, weights_view, ids_view, stream);
  run(prepared, config, RoutedBatch{hidden, weights_view, ids_view, out, stream});
}

void Backend::run_batched(const PreparedExperts& /*prepared*/, const MoEConfig& /*config*/,
                          const BatchedBatch& /*batch*/) const {
  fail("backend '{}' does not take the batched_experts activation format", name());
}

std::span<const int32_t> checked_host_counts(std::string_view backend, const BatchedBatch& batch) {
  check(batch.counts.device().kind == DeviceKind::cpu,
        "backend '{}' reads counts on the host but they are on {}", backend,
        to_string(batch.counts.device()));
  const int64_t T_max = batch.x.dim(1);
  const std::span counts(batch.counts.data_as<const int32_t>(), size_t(batch.counts.numel()));
  for (size_t e = 0; e < counts.size(); ++e)
    check(counts[e] >= 0 && counts[e] <= T_max,
          "{}: counts[{}] = {} is not a row count of x [E, T_max={}, H] (valid: 0..{})", backend, e,
          counts[e], T_max, T_max);
  return counts;
}

}  // namespace qmoe
