#include "route/topk.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include "core/check.hpp"

namespace qmoe {

namespace {

// Higher score first; equal scores: lower index first.
struct ByScore {
  const float* score;
  bool operator()(int a, int b) const {
    return score[a] > score[b] || (score[a] == score[b] && a < b);
  }
};

void scores_of(Scoring scoring, const float* logits, int64_t E, float* scores) {
  if (scoring == Scoring::sigmoid) {
    for (int64_t e = 0; e < E; ++e) scores[e] = 1.0f / (1.0f + std::exp(-logits[e]));
    return;
  }
  const float peak = *std::max_element(logits, logits + E);
  float sum = 0.0f;
  for (int64_t e = 0; e < E; ++e) sum += scores[e] = std::exp(logits[e] - peak);
  for (int64_t e = 0; e < E; ++e) scores[e] /= sum;
}

}  // namespace

void route_topk(const RoutingConfig& c, const float* logits, int64_t M, int64_t E,
                float* topk_weights, int32_t* topk_ids) {
  const int k = c.top_k;
  check(k >= 1 && k <= E, "routing: top-k {} must be in 1..{} (experts)", k, E);
  check(c.correction_bias.empty() || static_cast<int64_t>(c.correction_bias.size()) == E,
        "routing: correction bias has {} entries for {} experts", c.correction_bias.size(), E);
  const bool grouped = c.n_group > 0;
  check(!grouped || (E % c.n_group == 0 && c.topk_group >= 1 && c.topk_group <= c.n_group),
        "routing: {} groups / topk_group {} invalid for {} experts", c.n_group, c.topk_group, E);

  std::vector<float> scores(E), choice(E);
  std::vector<int> order(E);
  const float masked = -std::numeric_limits<float>::infinity();
  for (int64_t m = 0; m < M; ++m) {
    scores_of(c.scoring, logits + m * E, E, scores.data());
    for (int64_t e = 0; e < E; ++e)
      choice[e] = scores[e] + (c.correction_bias.empty() ? 0.0f : c.correction_bias[e]);

    if (grouped) {
      const int64_t per_group = E / c.n_group;
      std::vector<float> group_score(c.n_group);
      for (int g = 0; g < c.n_group; ++g) {
        std::vector<float> members(choice.begin() + g * per_group,
                                   choice.begin() + (g + 1) * per_group);
        std::sort(members.begin(), members.end(), std::greater<>());
        group_score[g] = c.correction_bias.empty() ? members[0] : members[0] + members[1];
      }
      std::vector<int> groups(c.n_group);
      std::iota(groups.begin(), groups.end(), 0);
      std::partial_sort(groups.begin(), groups.begin() + c.topk_group, groups.end(),
                        ByScore{group_score.data()});
      std::vector<bool> keep(c.n_group, false);
      for (int i = 0; i < c.topk_group; ++i) keep[groups[i]] = true;
      for (int64_t e = 0; e < E; ++e)
        if (!keep[e / per_group]) choice[e] = masked;
    }

    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + k, order.end(), ByScore{choice.data()});
    float* w = topk_weights + m * k;
    int32_t* ids = topk_ids + m * k;
    float sum = 0.0f;
    for (int j = 0; j < k; ++j) {
      ids[j] = order[j];
      w[j] = scores[order[j]];
      sum += w[j];
    }
    for (int j = 0; j < k; ++j) {
      if (c.renormalize) w[j] /= sum;
      w[j] *= c.routed_scaling_factor;
    }
  }
}

}  // namespace qmoe
