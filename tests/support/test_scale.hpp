#pragma once
// Counts of the randomized tests (property, soak) scale with QMOE_TEST_SCALE (a factor, default
// 1): scripts/test-sanitize.sh runs them smaller under ASan + UBSan, a device run larger.
#include <algorithm>
#include <cstdint>
#include <cstdlib>

namespace qmoe::test {

inline int64_t scaled_count(int64_t count) {
  const char* text = std::getenv("QMOE_TEST_SCALE");
  const double scale = text ? std::atof(text) : 1.0;
  return std::max<int64_t>(1, static_cast<int64_t>(static_cast<double>(count) * scale));
}

}  // namespace qmoe::test
