// The canonical weight: hand-built tiny tensors with values worked out by hand, and one test per
// invariant that construction must refuse.
#include <gtest/gtest.h>

#include <cmath>

#include "qmoe/error.hpp"
#include "qmoe/quant.hpp"
#include "support/expect_error.hpp"

namespace qmoe {
namespace {

// E=1, N=2, K=4, int4, group 2, symmetric.
QuantizedWeight tiny_int4() {
  QuantizedWeight w;
  w.scheme = QuantScheme{.bits = 4, .group_size = 2};
  w.E = 1;
  w.N = 2;
  w.K = 4;
  w.codes = Buffer(DType::u8, {1, 2, 2});
  // row 0: k0=0x3, k1=0xA, k2=0xF, k3=0x0 ; row 1: k0=8, k1=9, k2=7, k3=1
  const uint8_t codes[] = {0xA3, 0x0F, 0x98, 0x17};
  std::copy(std::begin(codes), std::end(codes), w.codes.data_as<uint8_t>());
  w.scales = Buffer(DType::f32, {1, 2, 2});
  const float scales[] = {0.5f, 2.0f, 1.0f, -0.25f};
  std::copy(std::begin(scales), std::end(scales), w.scales.data_as<float>());
  return w;
}

TEST(QuantizedWeight, LowNibbleIsTheEvenChannel) {
  const QuantizedWeight w = tiny_int4();
  EXPECT_EQ(w.code(0, 0, 0), 0x3);
  EXPECT_EQ(w.code(0, 0, 1), 0xA);
  EXPECT_EQ(w.code(0, 1, 3), 0x1);
}

TEST(QuantizedWeight, SymmetricDequantSubtractsTheMidPoint) {
  const QuantizedWeight w = tiny_int4();
  EXPECT_FLOAT_EQ(w.dequant(0, 0, 0), (3 - 8) * 0.5f);
  EXPECT_FLOAT_EQ(w.dequant(0, 0, 1), (10 - 8) * 0.5f);
  EXPECT_FLOAT_EQ(w.dequant(0, 0, 2), (15 - 8) * 2.0f);
  EXPECT_FLOAT_EQ(w.dequant(0, 1, 3), (1 - 8) * -0.25f);
}

TEST(QuantizedWeight, ExplicitZerosAndActOrderGroups) {
  QuantizedWeight w = tiny_int4();
  w.scheme.zero_point = ZeroPoint::explicit_;
  w.scheme.act_order = true;
  w.zeros = Buffer(DType::u8, {1, 2, 2});
  const uint8_t zeros[] = {3, 15, 0, 9};
  std::copy(std::begin(zeros), std::end(zeros), w.zeros.data_as<uint8_t>());
  w.g_idx = Buffer(DType::i32, {1, 4});
  const int32_t groups[] = {1, 0, 0, 1};  // channel 0 in group 1, channel 1 in group 0, ...
  std::copy(std::begin(groups), std::end(groups), w.g_idx.data_as<int32_t>());
  EXPECT_NO_THROW(w.validate("w"));
  EXPECT_FLOAT_EQ(w.dequant(0, 0, 0), (3 - 15) * 2.0f);
  EXPECT_FLOAT_EQ(w.dequant(0, 0, 1), (10 - 3) * 0.5f);
  EXPECT_FLOAT_EQ(w.dequant(0, 1, 3), (1 - 9) * -0.25f);
}

void expect_invalid(const QuantizedWeight& w, const std::string& fragment) {
  test::expect_error([&] { w.validate("w13"); }, fragment);
}

TEST(QuantizedWeight, RefusesBrokenInvariantsWithSpecificMessages) {
  QuantizedWeight w = tiny_int4();
  w.scheme.group_size = 3;
  expect_invalid(w, "w13: group size 3 does not divide K = 4");

  w = tiny_int4();
  w.scheme.bits = 3;
  expect_invalid(w, "weight bits must be 4 or 8, got 3");

  w = tiny_int4();
  w.codes = Buffer(DType::u8, {1, 2, 4});
  expect_invalid(w, "w13.codes must be u8[1, 2, 2], got u8[1, 2, 4]");

  w = tiny_int4();
  w.scales = Buffer(DType::f16, {1, 2, 2});
  expect_invalid(w, "w13.scales must be f32[1, 2, 2], got f16[1, 2, 2]");

  w = tiny_int4();
  w.scales.data_as<float>()[3] = NAN;
  expect_invalid(w, "w13.scales: element 3 (expert 0, row 1, group 1) is nan");

  w = tiny_int4();
  w.scheme = QuantScheme{.kind = WeightKind::mxfp4, .bits = 4, .group_size = 32};
  w.K = 64;
  w.codes = Buffer(DType::u8, {1, 2, 32});
  w.scales = Buffer(DType::u8, {1, 2, 2});
  w.scales.data_as<uint8_t>()[0] = 0xfe;  // 2^127, the largest e8m0 scale
  EXPECT_NO_THROW(w.validate("w13"));
  w.scales.data_as<uint8_t>()[3] = 0xff;
  expect_invalid(w,
                 "w13.scales: element 3 (expert 0, row 1, group 1) is 0xff, the e8m0 NaN (valid: "
                 "0x00..0xfe, the powers of two 2^-127..2^127)");

  w = tiny_int4();
  w.zeros = Buffer(DType::u8, {1, 2, 2});
  expect_invalid(w, "zero points given but the scheme (int4 g2 sym) is symmetric");

  w = tiny_int4();
  w.scheme.zero_point = ZeroPoint::explicit_;
  w.zeros = Buffer(DType::u8, {1, 2, 2});
  w.zeros.data_as<uint8_t>()[1] = 16;
  expect_invalid(w, "w13.zeros: element 1 is 16, above the 4-bit maximum 15");

  w = tiny_int4();
  w.scheme.act_order = true;
  w.g_idx = Buffer(DType::i32, {1, 4});
  w.g_idx.data_as<int32_t>()[2] = 2;
  expect_invalid(w, "w13.g_idx: expert 0 channel 2 has group 2, valid 0..1");

  w = tiny_int4();
  w.bias = Buffer(DType::f32, {1, 3});
  expect_invalid(w, "w13.bias must be f32[1, 2], got f32[1, 3]");

  w = tiny_int4();
  w.scheme.group_size = kChannelwise;
  w.scheme.act_order = true;
  expect_invalid(w, "act-order needs grouped scales");
}

QuantizedWeight zero_weight(int64_t E, int64_t N, int64_t K) {
  QuantizedWeight w;
  w.scheme = QuantScheme{.bits = 8, .group_size = kChannelwise};
  w.E = E;
  w.N = N;
  w.K = K;
  w.codes = Buffer(DType::u8, {E, N, K});
  w.scales = Buffer(DType::f32, {E, N, 1});
  return w;
}

TEST(QuantizedExperts, ChecksThatW13AndW2Agree) {
  EXPECT_NO_THROW(QuantizedExperts(zero_weight(2, 8, 6), zero_weight(2, 6, 4)));  // gated, I=4
  EXPECT_NO_THROW(QuantizedExperts(zero_weight(2, 4, 6), zero_weight(2, 6, 4)));  // non-gated
  test::expect_error([] { QuantizedExperts(zero_weight(3, 8, 6), zero_weight(2, 6, 4)); },
                     "w13 has 3 experts but w2 has 2");
  test::expect_error([] { QuantizedExperts(zero_weight(2, 8, 6), zero_weight(2, 5, 4)); },
                     "w13's K (hidden, 6) must equal w2's N (5)");
  EXPECT_THROW(QuantizedExperts(zero_weight(2, 7, 6), zero_weight(2, 6, 4)), Error);
}

}  // namespace
}  // namespace qmoe
