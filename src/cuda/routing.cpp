#include "cuda/routing.hpp"
#include "core/check.hpp"

namespace qmoe {

RoutingParams routing_params(const RoutingConfig& c, const float* bias_dev) {
  check(c.correction_bias.empty() || bias_dev != nullptr,
        "routing: the config has a correction bias of {} entries but no device copy was given",
        c.correction_bias.size());
  return RoutingParams{c.scoring,
                       c.top_k,
                       c.renormalize,
                       c.routed_scaling_factor,
                       c.n_group,
                       c.topk_group,
                       c.correction_bias.empty() ? nullptr : bias_dev};
}

void validate_routing(const RoutingParams& p, int64_t E) {
  check(E >= 1 && E <= kMaxRoutingExperts, "GPU routing: {} experts, supported 1..{}", E,
        kMaxRoutingExperts);
  check(p.top_k >= 1 && p.top_k <= kMaxRoutingTopK && p.top_k <= E,
        "GPU routing: top-k {} must be in 1..{} (and at most E = {})", p.top_k, kMaxRoutingTopK, E);
  check(p.n_group >= 0, "GPU routing: n_group {} is negative", p.n_group);
  if (p.n_group == 0) return;
  check(E % p.n_group == 0 && p.topk_group >= 1 && p.topk_group <= p.n_group,
        "GPU routing: {} groups with topk_group {} do not fit {} experts (groups must divide E, "
        "1 <= topk_group <= n_group)",
        p.n_group, p.topk_group, E);
  check(p.correction_bias == nullptr || E / p.n_group >= 2,
        "GPU routing: a correction bias scores groups by their top two, but groups have {} expert",
        E / p.n_group);
}

}  // namespace qmoe
