// mxfp4_window_spread on hand-built weights whose answer is worked out by hand: which blocks share
// a window, that blocks of zero codes (+0 and -0) do not count, and what a window must be.
#include <gtest/gtest.h>

#include <algorithm>

#include "quant/mxfp4_windows.hpp"
#include "support/expect_error.hpp"

namespace qmoe {
namespace {

using test::expect_error;

// E = 1, N = 2, K = 128: four 32-blocks per row; every code 0x3 (1.5) and every scale 2^0.
QuantizedWeight even_weight() {
  QuantizedWeight w;
  w.scheme = QuantScheme{.kind = WeightKind::mxfp4, .bits = 4, .group_size = 32};
  w.E = 1;
  w.N = 2;
  w.K = 128;
  w.codes = Buffer(DType::u8, {1, 2, 64});
  std::ranges::fill(w.codes.span<uint8_t>(), uint8_t{0x33});
  w.scales = Buffer(DType::u8, {1, 2, 4});
  std::ranges::fill(w.scales.span<uint8_t>(), uint8_t{127});
  return w;
}

uint8_t& scale(QuantizedWeight& w, int row, int block) {
  return w.scales.data_as<uint8_t>()[row * 4 + block];
}

void fill_block(QuantizedWeight& w, int row, int block, uint8_t byte) {
  uint8_t* codes = w.codes.data_as<uint8_t>() + row * 64 + block * 16;
  std::fill(codes, codes + 16, byte);
}

TEST(Mxfp4WindowSpread, EvenScalesHaveNoSpread) {
  EXPECT_EQ(mxfp4_window_spread(even_weight(), 64), 0);
}

TEST(Mxfp4WindowSpread, IsTheLargestExponentGapInsideOneWindow) {
  QuantizedWeight w = even_weight();
  scale(w, 0, 0) = 120;  // row 0, window 0: 2^-7 and 2^0
  scale(w, 1, 3) = 132;  // row 1, window 1: 2^0 and 2^5
  EXPECT_EQ(mxfp4_window_spread(w, 64), 7);
  scale(w, 1, 2) = 117;  // row 1, window 1: 2^-10 and 2^5
  EXPECT_EQ(mxfp4_window_spread(w, 64), 15);
}

TEST(Mxfp4WindowSpread, BlocksOfNeighbouringWindowsDoNotCount) {
  QuantizedWeight w = even_weight();
  scale(w, 0, 0) = scale(w, 0, 1) = 100;  // window 0 at 2^-27, window 1 at 2^0
  EXPECT_EQ(mxfp4_window_spread(w, 64), 0);
  EXPECT_EQ(mxfp4_window_spread(w, 128), 27);  // one window of the whole row
}

TEST(Mxfp4WindowSpread, BlocksOfZeroCodesDoNotCount) {
  QuantizedWeight w = even_weight();
  scale(w, 0, 0) = 10;
  fill_block(w, 0, 0, 0x00);
  scale(w, 1, 1) = 250;
  fill_block(w, 1, 1, 0x88);  // -0
  EXPECT_EQ(mxfp4_window_spread(w, 64), 0);
  w.codes.data_as<uint8_t>()[5] = 0x10;  // one nonzero code (0.5) in row 0, block 0
  EXPECT_EQ(mxfp4_window_spread(w, 64), 117);
}

TEST(Mxfp4WindowSpread, IntegerWeightsHaveNone) {
  QuantizedWeight w = even_weight();
  w.scheme = QuantScheme{.bits = 4, .group_size = 32};
  EXPECT_EQ(mxfp4_window_spread(w, 64), 0);
}

TEST(Mxfp4WindowSpread, WindowMustBeWholeBlocksDividingK) {
  const QuantizedWeight w = even_weight();
  for (int64_t window : {0, 48, 96, 256})
    expect_error([&] { mxfp4_window_spread(w, window); },
                 "must be a multiple of 32 dividing K = 128");
}

}  // namespace
}  // namespace qmoe
