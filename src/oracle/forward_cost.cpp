#include "oracle/forward_cost.hpp"

#include <algorithm>
#include <cmath>

namespace qmoe {

double expected_sum_over_experts(int64_t pairs, int64_t experts,
                                 const std::function<double(int64_t rows)>& f) {
  if (pairs <= 0 || experts <= 0) return double(std::max<int64_t>(experts, 0)) * f(0);
  if (experts == 1) return f(pairs);
  const double n = double(pairs), p = 1.0 / double(experts);
  const double mean = n * p, sd = std::sqrt(n * p * (1 - p));
  // 8 standard deviations, plus 16 counts for small means, where the tail is Poisson's and not
  // the normal's (7 pairs over 128 experts: 3 rows on one expert is 5 standard deviations out).
  const auto lo = std::max<int64_t>(0, int64_t(std::floor(mean - 8 * sd)) - 16);
  const auto hi = std::min<int64_t>(pairs, int64_t(std::ceil(mean + 8 * sd)) + 16);
  // The probability at the mean's count through lgamma (pairs reach millions), the others by the
  // ratio of neighbours, P(k+1) / P(k) = (n - k) / (k + 1) * p / (1 - p): one lgamma per call.
  const auto start = std::clamp<int64_t>(int64_t(mean), lo, hi);
  const double x0 = double(start), odds = p / (1 - p);
  const double p0 = std::exp(std::lgamma(n + 1) - std::lgamma(x0 + 1) - std::lgamma(n - x0 + 1) +
                             x0 * std::log(p) + (n - x0) * std::log1p(-p));
  double sum = p0 * f(start);
  double pk = p0;
  for (int64_t k = start; k < hi; ++k) {
    pk *= (n - double(k)) / double(k + 1) * odds;
    sum += pk * f(k + 1);
  }
  pk = p0;
  for (int64_t k = start; k > lo; --k) {
    pk *= double(k) / (n - double(k) + 1) / odds;
    sum += pk * f(k - 1);
  }
  return double(experts) * sum;
}

int64_t modelled_crossover_tokens(const BackendDescriptor& small, const BackendDescriptor& large,
                                  const LayerDesc& layer) {
  if (!small.forward_us || !large.forward_us) return 0;
  const int64_t E = layer.num_experts, k = layer.top_k;
  // Batch sizes of 1 to kCrossoverScanRowsPerExpert rows per expert, every row count up to 256
  // and every 16th beyond (the models change slowly there).
  int64_t from = 0;
  for (int64_t rows = 1; rows <= kCrossoverScanRowsPerExpert; rows += rows < 256 ? 1 : 16) {
    const int64_t tokens = std::max<int64_t>(2, (rows * E + k - 1) / k);
    const bool large_faster = large.forward_us(layer, tokens) < small.forward_us(layer, tokens);
    if (!large_faster)
      from = 0;
    else if (from == 0)
      from = tokens;
  }
  return from;
}

}  // namespace qmoe
