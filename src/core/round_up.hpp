#pragma once
#include <cstdint>

namespace qmoe {

// x rounded up to a multiple of m (x >= 0, m > 0): rows padded to tiles, K to whole chunks.
constexpr int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

}  // namespace qmoe
