#pragma once
// Random small MoE layers for the property and soak tests: any scheme the canonical form holds
// (int4/int8 sym/asym, every group size dividing both GEMMs' K, act-order, mxfp4), any
// activation, dtype, bias and router-weight placement. Whether a backend runs it is the oracle's
// call, not the draw's.
#include <fmt/format.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "support/moe_case.hpp"

namespace qmoe::test {

template <class T>
T pick(std::mt19937_64& rng, const std::vector<T>& items) {
  return items[rng() % items.size()];
}

inline CaseSpec random_spec(std::mt19937_64& rng) {
  CaseSpec s;
  s.seed = rng();
  s.E = 1 + int64_t(rng() % 6);
  s.top_k = 1 + int(rng() % std::min<int64_t>(s.E, 3));
  s.H = pick<int64_t>(rng, {32, 64, 66, 96, 128});
  s.I = pick<int64_t>(rng, {16, 32, 48, 64, 66});
  s.M = 1 + int64_t(rng() % 4);
  const int kind = int(rng() % 5);  // 0: mxfp4, 1-2: int4, 3-4: int8
  if (kind == 0 && s.H % 32 == 0 && s.I % 32 == 0) {
    s.scheme = QuantScheme{.kind = WeightKind::mxfp4, .group_size = 32};
  } else {
    std::vector<int> groups{kChannelwise};
    for (int g : {2, 3, 4, 6, 8, 11, 16, 32, 33, 64})
      if (s.H % g == 0 && s.I % g == 0) groups.push_back(g);
    const int group = pick(rng, groups);
    // act-order permutes groups, so it needs grouped scales
    s.scheme =
        scheme(kind >= 3 ? 8 : 4, group, rng() % 2 == 0, group != kChannelwise && rng() % 3 == 0);
  }
  s.activation = pick(rng, all_activations());
  s.act_dtype = pick(rng, std::vector<DType>{DType::f32, DType::f16, DType::bf16});
  s.bias = rng() % 2 == 0;
  s.router_weight_on_input = s.top_k == 1 && rng() % 4 == 0;
  return s;
}

inline std::string describe(const CaseSpec& s) {
  return fmt::format("{} E={} H={} I={} M={} top-{} {} {} bias {} on-input {} seed {}",
                     to_string(s.scheme), s.E, s.H, s.I, s.M, s.top_k, name(s.activation),
                     name(s.act_dtype), s.bias, s.router_weight_on_input, s.seed);
}

// Normalized-error bounds of the backend tests: f32 math 1e-5, plus the output rounding of f16
// (2^-11) and of bf16 twice (2 x 2^-8: the cpu backend rounds its intermediate to bf16 too).
inline double host_bound_for(DType dtype) {
  if (dtype == DType::f16) return 1e-5 + 1.0 / 2048;
  if (dtype == DType::bf16) return 1e-5 + 2.0 / 256;
  return 1e-5;
}

}  // namespace qmoe::test
