// The reference quantizer: codes worked out by hand for tiny inputs, and on random data the
// properties that define round-to-nearest (error at most half a step, groups as asked).
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <random>

#include "qmoe/error.hpp"
#include "qmoe/quantize.hpp"

namespace qmoe {
namespace {

TEST(Quantizer, SymmetricInt4ByHand) {
  // One group of 4: absmax 1.4 -> scale 0.2; codes round(w/0.2) + 8.
  const std::vector<float> w = {1.4f, -0.3f, 0.05f, -1.4f};
  const QuantizedWeight q = quantize_rtn(w, 1, 1, 4, QuantScheme{.bits = 4, .group_size = 4});
  EXPECT_FLOAT_EQ(q.scales.data_as<float>()[0], 0.2f);
  // -0.3/0.2 = -1.5 rounds away from zero to -2; 0.05/0.2 = 0.25 rounds to 0.
  EXPECT_EQ(q.code(0, 0, 0), 15);
  EXPECT_EQ(q.code(0, 0, 1), 6);
  EXPECT_EQ(q.code(0, 0, 2), 8);
  EXPECT_EQ(q.code(0, 0, 3), 1);
}

TEST(Quantizer, AsymmetricInt4ByHand) {
  // min -0.5, max 1.0 -> scale 0.1, zero round(5) = 5.
  const std::vector<float> w = {-0.5f, 1.0f, 0.0f, 0.26f};
  const QuantizedWeight q = quantize_rtn(
      w, 1, 1, 4, QuantScheme{.bits = 4, .zero_point = ZeroPoint::explicit_, .group_size = 4});
  EXPECT_NEAR(q.scales.data_as<float>()[0], 0.1f, 1e-7);
  EXPECT_EQ(q.zeros.data_as<uint8_t>()[0], 5);
  EXPECT_EQ(q.code(0, 0, 0), 0);
  EXPECT_EQ(q.code(0, 0, 1), 15);
  EXPECT_EQ(q.code(0, 0, 2), 5);
  EXPECT_EQ(q.code(0, 0, 3), 8);
}

TEST(Quantizer, ActOrderAssignsGroupsInPermutationOrder) {
  const std::vector<float> w = {0.1f, 0.2f, 0.3f, 0.4f};
  const std::vector<int32_t> perm = {2, 0, 3, 1};  // channels 2,0 -> group 0; 3,1 -> group 1
  const QuantizedWeight q = quantize_rtn(
      w, 1, 1, 4, QuantScheme{.bits = 4, .group_size = 2, .act_order = true}, {}, perm);
  const int32_t* g = q.g_idx.data_as<int32_t>();
  EXPECT_EQ(g[0], 0);
  EXPECT_EQ(g[1], 1);
  EXPECT_EQ(g[2], 0);
  EXPECT_EQ(g[3], 1);
  EXPECT_FLOAT_EQ(q.scales.data_as<float>()[0], 0.3f / 7);
  EXPECT_FLOAT_EQ(q.scales.data_as<float>()[1], 0.4f / 7);
}

struct RoundTrip {
  QuantScheme scheme;
  int64_t K;
};

class QuantizerRoundTrip : public testing::TestWithParam<RoundTrip> {};

// Every element dequantizes to within half a step of its input, unless it was clamped, which
// round-to-nearest allows only for asymmetric groups at the code range's ends (at most a step).
TEST_P(QuantizerRoundTrip, ErrorAtMostHalfAStep) {
  const auto [scheme, K] = GetParam();
  const int64_t E = 3, N = 5;
  std::mt19937_64 rng(11);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> w(E * N * K);
  for (float& v : w) v = normal(rng);
  std::vector<int32_t> perm;
  if (scheme.act_order) {
    perm.resize(E * K);
    for (int64_t e = 0; e < E; ++e) {
      std::iota(perm.begin() + e * K, perm.begin() + (e + 1) * K, 0);
      std::shuffle(perm.begin() + e * K, perm.begin() + (e + 1) * K, rng);
    }
  }
  const QuantizedWeight q = quantize_rtn(w, E, N, K, scheme, {}, perm);
  for (int64_t e = 0; e < E; ++e)
    for (int64_t n = 0; n < N; ++n)
      for (int64_t k = 0; k < K; ++k) {
        const int64_t at = (e * N + n) * scheme.groups_for(K) + q.group_of(e, k);
        const float step = q.scales.data_as<float>()[at];
        const float err = std::fabs(q.dequant(e, n, k) - w[(e * N + n) * K + k]);
        EXPECT_LE(err, (scheme.has_zero_points() ? 1.0f : 0.5f) * step * (1 + 1e-5f))
            << e << "," << n << "," << k;
      }
}

INSTANTIATE_TEST_SUITE_P(
    Schemes, QuantizerRoundTrip,
    testing::Values(
        RoundTrip{QuantScheme{.bits = 4, .group_size = 32}, 96},
        RoundTrip{QuantScheme{.bits = 4, .zero_point = ZeroPoint::explicit_, .group_size = 64},
                  128},
        RoundTrip{QuantScheme{.bits = 8, .group_size = kChannelwise}, 70},
        RoundTrip{QuantScheme{.bits = 8, .zero_point = ZeroPoint::explicit_, .group_size = 16}, 48},
        RoundTrip{QuantScheme{.bits = 4, .group_size = 24, .act_order = true}, 72}));

TEST(Quantizer, Mxfp4UsesPowerOfTwoScalesAndE2m1Codes) {
  // absmax 3 -> scale 2^ceil(log2(0.5)) = 0.5; 3/0.5 = 6 -> code 7; -0.75/0.5 = -1.5 -> code 8|3.
  std::vector<float> w(32, 0.0f);
  w[0] = 3.0f;
  w[1] = -0.75f;
  const QuantizedWeight q =
      quantize_rtn(w, 1, 1, 32, QuantScheme{.kind = WeightKind::mxfp4, .group_size = 32});
  EXPECT_EQ(q.scales.data_as<uint8_t>()[0], 126);
  EXPECT_EQ(q.code(0, 0, 0), 7);
  EXPECT_EQ(q.code(0, 0, 1), 11);
  EXPECT_FLOAT_EQ(q.dequant(0, 0, 1), -0.75f);
}

TEST(Quantizer, RefusesInconsistentRequests) {
  const std::vector<float> w(12, 1.0f);
  EXPECT_THROW(quantize_rtn(w, 1, 2, 6, QuantScheme{.bits = 4, .group_size = 4}), Error);
  EXPECT_THROW(quantize_rtn(w, 1, 3, 5, QuantScheme{.bits = 4, .group_size = kChannelwise}),
               Error);  // 4-bit needs even K (and 15 != 12 values)
  EXPECT_THROW(quantize_rtn(w, 1, 2, 6, QuantScheme{.bits = 4, .group_size = 2, .act_order = true}),
               Error);  // act-order without a permutation
  const std::vector<int32_t> repeated = {0, 0, 1, 2, 3, 4};
  EXPECT_THROW(
      quantize_rtn(std::span<const float>(w.data(), 6), 1, 1, 6,
                   QuantScheme{.bits = 4, .group_size = 2, .act_order = true}, {}, repeated),
      Error);
}

}  // namespace
}  // namespace qmoe
