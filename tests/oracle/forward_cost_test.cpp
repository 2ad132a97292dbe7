// The helpers the backends' cost models share, and the crossover the oracle draws from two models,
// checked on hand-worked cases and toy models (the shipped models are checked against measured
// times in crossover_model_test.cpp).
#include <gtest/gtest.h>

#include <array>
#include <utility>

#include "backend/cuda_wgmma/token_tiles.hpp"
#include "layers.hpp"
#include "oracle/forward_cost.hpp"

namespace qmoe {
namespace {

// Two pairs over two experts: an expert gets 0, 1 or 2 of them with probability 1/4, 1/2, 1/4.
TEST(ExpectedSumOverExperts, TwoPairsOverTwoExpertsByHand) {
  const auto f = [](int64_t rows) { return rows == 0 ? 3.0 : rows == 1 ? 5.0 : 11.0; };
  EXPECT_NEAR(expected_sum_over_experts(2, 2, f), 2 * (3.0 / 4 + 5.0 / 2 + 11.0 / 4), 1e-12);
}

// The rows of all experts add up to the pairs, and their squares to E (var + mean^2) of the
// binomial, at sizes where the sum runs over hundreds of counts.
TEST(ExpectedSumOverExperts, MomentsOfTheBinomial) {
  for (const auto& [pairs, E] : {std::pair<int64_t, int64_t>{65536, 256}, {20000, 8}, {7, 128}}) {
    const double p = 1.0 / double(E), n = double(pairs);
    EXPECT_NEAR(expected_sum_over_experts(pairs, E, [](int64_t r) { return double(r); }), n,
                1e-9 * n);
    const double squares = double(E) * (n * p * (1 - p) + n * n * p * p);
    EXPECT_NEAR(expected_sum_over_experts(pairs, E, [](int64_t r) { return double(r * r); }),
                squares, 1e-9 * squares);
  }
}

TEST(ExpectedSumOverExperts, OneExpertOrNoPairs) {
  EXPECT_EQ(expected_sum_over_experts(40, 1, [](int64_t r) { return double(r); }), 40.0);
  EXPECT_EQ(expected_sum_over_experts(0, 8, [](int64_t r) { return r == 0 ? 1.0 : 0.0; }), 8.0);
}

// cuda-wgmma's split of an expert's rows (routing_glue.cu): whole 256-token tiles, then the
// remainder in the smallest tile that holds it, or one more 256-token tile.
TEST(WgmmaTokenTiles, SplitOfAnExpertsRows) {
  const auto tiles = [](int64_t rows) {
    const cuda_wgmma::ExpertTiles t = cuda_wgmma::expert_tiles(rows);
    return std::array<int64_t, 3>{t.count[0], t.count[1], t.count[2]};
  };
  EXPECT_EQ(tiles(0), (std::array<int64_t, 3>{0, 0, 0}));
  EXPECT_EQ(tiles(1), (std::array<int64_t, 3>{0, 0, 1}));
  EXPECT_EQ(tiles(64), (std::array<int64_t, 3>{0, 0, 1}));
  EXPECT_EQ(tiles(65), (std::array<int64_t, 3>{0, 1, 0}));
  EXPECT_EQ(tiles(129), (std::array<int64_t, 3>{1, 0, 0}));
  EXPECT_EQ(tiles(256), (std::array<int64_t, 3>{1, 0, 0}));
  EXPECT_EQ(tiles(300), (std::array<int64_t, 3>{1, 0, 1}));
  EXPECT_EQ(tiles(400), (std::array<int64_t, 3>{2, 0, 0}));
}

// Toy models on a layer of one expert at top-1, where tokens = rows per expert: the small backend
// costs one microsecond per token, the large one 100 plus half a microsecond per token, so the
// large one is faster from 201 tokens on.
double small_us(const LayerDesc&, int64_t tokens) { return double(tokens); }
double large_us(const LayerDesc&, int64_t tokens) { return 100 + 0.5 * double(tokens); }
double large_in_a_window_us(const LayerDesc&, int64_t tokens) {
  return tokens >= 50 && tokens < 80 ? 0.0 : 2.0 * double(tokens);
}
double never_faster_us(const LayerDesc&, int64_t tokens) { return 2.0 * double(tokens); }

LayerDesc one_expert_layer() {
  LayerDesc l = test::base_layer();
  l.num_experts = 1;
  l.top_k = 1;
  return l;
}

TEST(ModelledCrossover, FirstTokenCountFromWhichTheLargeModelStaysFaster) {
  BackendDescriptor small, large;
  small.forward_us = small_us;
  large.forward_us = large_us;
  EXPECT_EQ(modelled_crossover_tokens(small, large, one_expert_layer()), 201);
  // at top-8 of 128 experts, 201 rows per expert are 201 * 16 tokens
  LayerDesc wide = test::base_layer();
  large.forward_us = [](const LayerDesc& l, int64_t tokens) {
    return 100 + 0.5 * double(tokens * l.top_k / l.num_experts);
  };
  small.forward_us = [](const LayerDesc& l, int64_t tokens) {
    return double(tokens * l.top_k / l.num_experts);
  };
  EXPECT_EQ(modelled_crossover_tokens(small, large, wide), 201 * 16);
}

TEST(ModelledCrossover, AWindowOfWinsIsNoCrossoverAndNeitherIsNoModel) {
  BackendDescriptor small, large, unmodelled;
  small.forward_us = small_us;
  large.forward_us = large_in_a_window_us;
  EXPECT_EQ(modelled_crossover_tokens(small, large, one_expert_layer()), 0);
  large.forward_us = never_faster_us;
  EXPECT_EQ(modelled_crossover_tokens(small, large, one_expert_layer()), 0);
  EXPECT_EQ(modelled_crossover_tokens(small, unmodelled, one_expert_layer()), 0);
  EXPECT_EQ(modelled_crossover_tokens(unmodelled, large, one_expert_layer()), 0);
}

TEST(ModelledCrossover, AtLeastTwoTokens) {
  BackendDescriptor small, large;
  small.forward_us = small_us;
  large.forward_us = [](const LayerDesc&, int64_t) { return 0.0; };
  EXPECT_EQ(modelled_crossover_tokens(small, large, one_expert_layer()), 2);
}

}  // namespace
}  // namespace qmoe
