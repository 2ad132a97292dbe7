#include "quant/act_order.hpp"

#include <algorithm>
#include <numeric>

#include "core/check.hpp"

namespace qmoe {

std::vector<int32_t> even_act_order(const QuantizedWeight& w, int64_t e, std::string_view backend,
                                    const std::string& what) {
  const int64_t K = w.K, G = w.scheme.group_size_for(K);
  const int32_t* g_idx = w.g_idx.data_as<int32_t>() + e * K;
  std::vector<int64_t> count(static_cast<size_t>(K / G), 0);
  for (int64_t k = 0; k < K; ++k) {
    // A K-split shard's g_idx may name groups of the full K: refuse rather than count past them.
    check(g_idx[k] >= 0 && g_idx[k] < K / G,
          "{}.g_idx: expert {} channel {} is in group {}; the {} backend needs groups 0..{} of "
          "this weight's K = {} (is it a K-split shard?)",
          what, e, k, g_idx[k], backend, K / G - 1, K);
    ++count[static_cast<size_t>(g_idx[k])];
  }
  for (int64_t g = 0; g < K / G; ++g) {
    check(count[static_cast<size_t>(g)] == G,
          "{}.g_idx: expert {} has {} channels in group {}; the {} backend needs exactly the "
          "group size {} in every act-order group (as GPTQ's act-order produces)",
          what, e, count[static_cast<size_t>(g)], g, backend, G);
  }
  std::vector<int32_t> order(static_cast<size_t>(K));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int32_t a, int32_t b) { return g_idx[a] < g_idx[b]; });
  return order;
}

}  // namespace qmoe
