#include "route/routing_contract.hpp"

#include <cmath>
#include <cstdlib>
#include <string_view>

#include "core/check.hpp"
#include "qmoe/shard.hpp"

namespace qmoe {

void check_routed_input(const int32_t* ids, const float* weights, int64_t M, int64_t k, int64_t E,
                        bool not_here_ok) {
  for (int64_t m = 0; m < M; ++m) {
    const int32_t* row = ids + m * k;
    for (int64_t j = 0; j < k; ++j) {
      check((row[j] >= 0 && row[j] < E) || (not_here_ok && row[j] == kExpertNotHere),
            "topk_ids[{}, {}] = {} is not an expert id (valid: 0..{}{})", m, j, row[j], E - 1,
            not_here_ok ? ", or -1 for an expert on another rank" : "");
      const float w = weights[m * k + j];
      check(std::isfinite(w), "topk_weights[{}, {}] is {} (valid: a finite weight)", m, j, w);
    }
  }
}

void check_router_logits(const float* logits, int64_t M, int64_t E) {
  for (int64_t i = 0; i < M * E; ++i) {
    check(std::isfinite(logits[i]), "router_logits[{}, {}] is {} (valid: a finite logit)", i / E,
          i % E, logits[i]);
  }
}

bool routing_checks_on() {
  const char* value = std::getenv("QMOE_CHECK_ROUTING");
  return value != nullptr && *value != '\0' && std::string_view(value) != "0";
}

}  // namespace qmoe
