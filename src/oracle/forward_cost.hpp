#pragma once
// The plan's crossover from modelled forward times (BackendDescriptor::forward_us): each backend
// models its own kernel, and the oracle lets the large-batch partner run from the first batch size
// where its model is faster for good. The helpers here are what the models share.
#include <cstdint>
#include <functional>

#include "oracle/descriptor.hpp"

namespace qmoe {

// The sum over E experts of f(rows of one expert), expected when `pairs` (token, slot) pairs are
// routed evenly at random: an expert's rows are then binomial(pairs, 1/E). Counts further than 8
// standard deviations and 16 rows from the mean are left out (their probability is below 1e-15).
double expected_sum_over_experts(int64_t pairs, int64_t experts,
                                 const std::function<double(int64_t rows)>& f);

// The first token count from which `large` is modelled faster than `small` at every batch size of
// up to kCrossoverScanRowsPerExpert rows per expert, at least 2 (one token is always the small
// backend's); 0 when `large` is not faster at that size, or either has no model.
inline constexpr int64_t kCrossoverScanRowsPerExpert = 1024;
int64_t modelled_crossover_tokens(const BackendDescriptor& small, const BackendDescriptor& large,
                                  const LayerDesc& layer);

}  // namespace qmoe
