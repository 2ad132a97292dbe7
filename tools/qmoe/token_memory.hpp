#pragma once
// --tokens against this machine's memory: the host buffers a checked forward holds per token.
#include <cstdint>

#include "qmoe/config.hpp"
#include "qmoe/dtype.hpp"

namespace qmoe::cli {

// A usage error naming --tokens, the bytes its buffers take (hidden states, router logits,
// routing, output and the float64 reference, in `dtype`) and how many tokens fit, when that is
// more than the memory this machine has available. Does nothing where that is not known.
void check_tokens_fit(int64_t tokens, const MoEConfig& config, DType dtype);

}  // namespace qmoe::cli
