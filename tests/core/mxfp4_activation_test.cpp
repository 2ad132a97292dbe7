// W4A4's activation quantizer (quant/mxfp4.hpp) on blocks worked out by hand from the OCP MX v1.0
// rule: scale 2^(floor(log2 max|x|) - 2) (at least 2^-127), elements rounded to the nearest e2m1
// value (0, 0.5, 1, 1.5, 2, 3, 4, 6) ties to even, saturating at 6; and from Quark's "even" rule,
// which takes the exponent of max|x| rounded to a power of two (up from 1.75 * 2^e), clamped to
// -127..127. mxfp4_quark_table_test.cpp checks the even rule against Quark's own outputs.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "qmoe/error.hpp"
#include "quant/mxfp4.hpp"

namespace qmoe {
namespace {

// One block of 32: `head` then zeros (which never change the block's maximum).
template <class T = float>
std::vector<T> quantized_block(const std::vector<T>& head,
                               ActivationQuant rule = ActivationQuant::mxfp4) {
  std::vector<T> block(32, T(0));
  std::copy(head.begin(), head.end(), block.begin());
  mxfp4_quantize_dequantize(std::span<T>(block), rule);
  return {block.begin(), block.begin() + static_cast<ptrdiff_t>(head.size())};
}

template <class T = float>
std::vector<T> even_block(const std::vector<T>& head) {
  return quantized_block<T>(head, ActivationQuant::mxfp4_even);
}

TEST(Mxfp4Activations, TiesGoToTheEvenNeighbour) {
  // max 6: floor(log2 6) = 2, scale 2^0. Halfway cases pick the code whose mantissa bit is 0.
  EXPECT_EQ(quantized_block<float>({6.0f, 0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f, -2.5f}),
            (std::vector<float>{6.0f, 0.0f, 1.0f, 1.0f, 2.0f, 2.0f, 4.0f, 4.0f, -2.0f}));
}

TEST(Mxfp4Activations, ValuesBetweenSixAndEightTimesTheScaleSaturate) {
  // max 7.5: floor(log2 7.5) = 2, scale 1, so 7.5 itself saturates to 6; 6.9 too; 5.5 rounds up.
  EXPECT_EQ(quantized_block<float>({7.5f, -6.9f, 5.5f, 4.9f}),
            (std::vector<float>{6.0f, -6.0f, 6.0f, 4.0f}));
}

TEST(Mxfp4Activations, SubnormalCodesHoldPlusMinusHalf) {
  // max 4: scale 1. 0.3 and -0.5 land on the subnormal codes +-0.5; -0.2 becomes -0.
  const std::vector<float> q = quantized_block<float>({4.0f, 0.3f, -0.5f, -0.2f, 0.5f});
  EXPECT_EQ(q, (std::vector<float>{4.0f, 0.5f, -0.5f, 0.0f, 0.5f}));
  EXPECT_TRUE(std::signbit(q[3]));
}

TEST(Mxfp4Activations, ScaleFollowsTheBlockMaximum) {
  // max 0.1: floor(log2 0.1) = -4, scale 2^-6: 6.4 -> 6, 3.2 -> 3, -1.92 -> -2 (in 64ths).
  EXPECT_EQ(quantized_block<float>({0.1f, 0.05f, -0.03f}),
            (std::vector<float>{6.0f / 64, 3.0f / 64, -2.0f / 64}));
  // max 1000: floor(log2 1000) = 9, scale 2^7: 7.8 -> 6, 2.34 -> 2, -0.2 -> -0.
  EXPECT_EQ(quantized_block<float>({1000.0f, 300.0f, -25.0f}),
            (std::vector<float>{768.0f, 256.0f, 0.0f}));
}

TEST(Mxfp4Activations, SmallestScaleIsTwoToMinus127) {
  // max 2^-125: scale 2^-127 exactly, 4 * scale survives. max 2^-130 would want 2^-132; clamped
  // to 2^-127 the block is 0.125 of a unit and rounds to 0.
  EXPECT_EQ(quantized_block<float>({std::ldexp(1.0f, -125)}),
            (std::vector<float>{std::ldexp(1.0f, -125)}));
  EXPECT_EQ(quantized_block<float>({std::ldexp(1.0f, -130)}), (std::vector<float>{0.0f}));
}

TEST(Mxfp4Activations, AllZeroBlockStaysZero) {
  std::vector<float> block(32, 0.0f);
  block[5] = -0.0f;
  mxfp4_quantize_dequantize(std::span<float>(block), ActivationQuant::mxfp4);
  for (float v : block) EXPECT_EQ(v, 0.0f);
  EXPECT_TRUE(std::signbit(block[5]));
}

TEST(Mxfp4Activations, NonFiniteValueMakesItsBlockNaN) {
  std::vector<float> two_blocks(64, 1.0f);
  two_blocks[3] = INFINITY;
  mxfp4_quantize_dequantize(std::span<float>(two_blocks), ActivationQuant::mxfp4);
  for (int i = 0; i < 32; ++i) EXPECT_TRUE(std::isnan(two_blocks[i])) << i;
  for (int i = 32; i < 64; ++i) EXPECT_EQ(two_blocks[i], 1.0f) << i;
  std::vector<float> nan_block(32, 2.0f);
  nan_block[31] = NAN;
  mxfp4_quantize_dequantize(std::span<float>(nan_block), ActivationQuant::mxfp4);
  EXPECT_TRUE(std::isnan(nan_block[0]));
}

TEST(Mxfp4Activations, BlocksAreIndependent) {
  // Block 0's max is 6 (scale 1), block 1's is 0.75 (scale 2^-3): 0.3 rounds to 0.5 in the first
  // and, as 2.4 units of 2^-3, to 2 * 2^-3 = 0.25 in the second.
  std::vector<float> x(64, 0.0f);
  x[0] = 6.0f;
  x[1] = 0.3f;
  x[32] = 0.75f;
  x[33] = 0.3f;
  mxfp4_quantize_dequantize(std::span<float>(x), ActivationQuant::mxfp4);
  EXPECT_EQ(x[1], 0.5f);
  EXPECT_EQ(x[32], 0.75f);
  EXPECT_EQ(x[33], 0.25f);
}

TEST(Mxfp4Activations, DoubleGivesTheSameValues) {
  EXPECT_EQ(quantized_block<double>({6.0, 0.25, 0.75, 5.0, 7.5, -0.3}),
            (std::vector<double>{6.0, 0.0, 1.0, 4.0, 6.0, -0.5}));
}

TEST(Mxfp4Activations, RefusesPartialBlocksAndNoRule) {
  std::vector<float> x(48, 1.0f);
  EXPECT_THROW(mxfp4_quantize_dequantize(std::span<float>(x), ActivationQuant::mxfp4), Error);
  std::vector<float> block(32, 1.0f);
  EXPECT_THROW(mxfp4_quantize_dequantize(std::span<float>(block), ActivationQuant::none), Error);
}

TEST(Mxfp4EvenActivations, MaximumFromOnePointSevenFiveRoundsUp) {
  // max just below 1.75: no rounding, floor(log2) = 0, scale 2^-2 as by the floor rule; the max
  // (7.0 units) saturates to 6 units = 1.5, and 0.1 = 0.4 units rounds to 0.5 units = 0.125.
  const float below = std::nextafter(1.75f, 0.0f);
  EXPECT_EQ(even_block<float>({below, 0.1f}), (std::vector<float>{1.5f, 0.125f}));
  EXPECT_EQ(quantized_block<float>({below, 0.1f}), (std::vector<float>{1.5f, 0.125f}));
  // max 1.75 rounds to 2: scale 2^-1. 1.75 = 3.5 units, a tie, goes to 4 units = 2; 0.1 = 0.2
  // units rounds to 0. The floor rule keeps scale 2^-2 and saturates the max to 1.5.
  EXPECT_EQ(even_block<float>({1.75f, 0.1f}), (std::vector<float>{2.0f, 0.0f}));
  EXPECT_EQ(quantized_block<float>({1.75f, 0.1f}), (std::vector<float>{1.5f, 0.125f}));
  // Negative maxima count by magnitude: -7 = -1.75 * 4 rounds to 8, scale 2^1, -7 -> -3.5 units
  // -> -4 units = -8; 1 = 0.5 units stays.
  EXPECT_EQ(even_block<float>({-7.0f, 1.0f}), (std::vector<float>{-8.0f, 1.0f}));
}

TEST(Mxfp4EvenActivations, PowersOfTwoAndOtherMaximaKeepTheirExponent) {
  // max 2 (significand 1): scale 2^-1, 2 = 4 units; 0.3 = 0.6 units -> 0.5 units = 0.25.
  EXPECT_EQ(even_block<float>({2.0f, 0.3f}), (std::vector<float>{2.0f, 0.25f}));
  // max 6 = 1.5 * 4: scale 2^0, the ties go to the even neighbour as in the floor rule.
  EXPECT_EQ(even_block<float>({6.0f, 0.25f, 0.75f, 2.5f, 5.0f, -3.5f}),
            (std::vector<float>{6.0f, 0.0f, 1.0f, 2.0f, 4.0f, -4.0f}));
  // max 2^-100: scale 2^-102, the max is 4 units.
  EXPECT_EQ(even_block<float>({std::ldexp(1.0f, -100)}),
            (std::vector<float>{std::ldexp(1.0f, -100)}));
}

TEST(Mxfp4EvenActivations, ScaleIsClampedToE8m0) {
  // max 1.75 * 2^-125 rounds to 2^-124: scale 2^-126; the max is 3.5 units -> 4 units.
  EXPECT_EQ(even_block<float>({std::ldexp(1.75f, -125)}),
            (std::vector<float>{std::ldexp(1.0f, -124)}));
  // max 2^-126 would want 2^-128: clamped to 2^-127 it is 2 units and stays; a subnormal max
  // 2^-140 is 2^-13 units and rounds to 0.
  EXPECT_EQ(even_block<float>({std::ldexp(1.0f, -126)}),
            (std::vector<float>{std::ldexp(1.0f, -126)}));
  EXPECT_EQ(even_block<float>({std::ldexp(1.0f, -140)}), (std::vector<float>{0.0f}));
  // FLT_MAX rounds to 2^128: Quark's float32 infinity, whose scale is clamped to 2^127. FLT_MAX
  // is ~2 units -> 2 units = 2^128, infinity in float; 1.2e38 is ~0.705 units -> 0.5 = 2^126.
  const float big = std::numeric_limits<float>::max();
  EXPECT_EQ(even_block<float>({big, 1.2e38f}),
            (std::vector<float>{INFINITY, std::ldexp(1.0f, 126)}));
  // The same in double, where 2^128 is finite: the scale is still 2^127.
  EXPECT_EQ(even_block<double>({double(big), 1.2e38}),
            (std::vector<double>{std::ldexp(1.0, 128), std::ldexp(1.0, 126)}));
}

TEST(Mxfp4EvenActivations, ZeroAndNonFiniteBlocks) {
  EXPECT_EQ(even_block<float>({0.0f, -0.0f}), (std::vector<float>{0.0f, 0.0f}));
  // Quark keeps an infinity and rounds the rest at scale 2^127; qmoe makes the block NaN.
  for (const float bad : {NAN, INFINITY, -INFINITY}) {
    const std::vector<float> q = even_block<float>({1.0f, bad, 2.0f});
    for (float v : q) EXPECT_TRUE(std::isnan(v)) << bad;
  }
}

}  // namespace
}  // namespace qmoe
