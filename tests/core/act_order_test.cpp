// even_act_order (src/quant/act_order.hpp), the channel order that the cpu and cuda-wgmma backends
// share, against its definition: group g's channels, in their original order, fill positions
// g * group .. (g + 1) * group - 1.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "quant/act_order.hpp"
#include "support/expect_error.hpp"
#include "support/moe_case.hpp"

namespace qmoe {
namespace {

using test::scheme;

TEST(EvenActOrder, SortsEachExpertsChannelsByGroupKeepingTheirOrder) {
  std::mt19937_64 rng(21);
  const QuantizedWeight w = test::random_weight(3, 16, 256, scheme(4, 64, false, true), false, rng);
  for (int64_t e = 0; e < w.E; ++e) {
    const int32_t* g_idx = w.g_idx.data_as<int32_t>() + e * w.K;
    std::vector<int32_t> expected;
    for (int32_t g = 0; g < 4; ++g)
      for (int32_t k = 0; k < int32_t(w.K); ++k)
        if (g_idx[k] == g) expected.push_back(k);
    std::vector<int32_t> identity(expected.size());
    for (size_t k = 0; k < identity.size(); ++k) identity[k] = int32_t(k);
    ASSERT_NE(expected, identity) << "the test needs a g_idx that is not already sorted";
    EXPECT_EQ(even_act_order(w, e, "test", "w"), expected) << "expert " << e;
  }
}

TEST(EvenActOrder, RefusesGroupsOutsideThisWeightsK) {
  std::mt19937_64 rng(22);
  QuantizedWeight w = test::random_weight(2, 16, 256, scheme(4, 64, false, true), false, rng);
  w.g_idx.data_as<int32_t>()[w.K + 5] = 4;  // 4 groups of 64: group 4 belongs to a larger K
  test::expect_error(
      [&] { even_act_order(w, 1, "test", "w"); },
      "w.g_idx: expert 1 channel 5 is in group 4; the test backend needs groups 0..3 "
      "of this weight's K = 256 (is it a K-split shard?)");
}

}  // namespace
}  // namespace qmoe
