#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>

#include "qmoe/error.hpp"
#include "qmoe/tensor.hpp"

namespace qmoe {
namespace {

TEST(TensorView, ContiguousStridesAreRowMajor) {
  float data[24];
  TensorView v(data, DType::f32, {2, 3, 4});
  EXPECT_EQ(v.rank(), 3);
  EXPECT_EQ(v.stride(0), 12);
  EXPECT_EQ(v.stride(1), 4);
  EXPECT_EQ(v.stride(2), 1);
  EXPECT_EQ(v.numel(), 24);
  EXPECT_EQ(v.nbytes(), 96);
  EXPECT_TRUE(v.is_contiguous());
  EXPECT_EQ(v.describe(), "f32[2, 3, 4] (cpu)");
}

TEST(TensorView, TransposedViewIsNotContiguous) {
  float data[6];
  const int64_t shape[] = {3, 2}, strides[] = {1, 3};
  TensorView v(data, DType::f32, shape, strides);
  EXPECT_FALSE(v.is_contiguous());
}

TEST(TensorView, RejectsTooManyDimensionsAndNegativeSizes) {
  const int64_t five[] = {1, 1, 1, 1, 1};
  EXPECT_THROW(TensorView(nullptr, DType::f32, five), Error);
  EXPECT_THROW(TensorView(nullptr, DType::f32, {2, -1}), Error);
}

TEST(Buffer, OwnsAlignedZeroedMemoryAndChecksTypes) {
  Buffer b(DType::bf16, {3, 5});
  EXPECT_EQ(b.numel(), 15);
  EXPECT_EQ(b.nbytes(), 30);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b.data()) % 64, 0u);
  EXPECT_NO_THROW(b.data_as<bf16_t>());
  EXPECT_THROW(b.data_as<float>(), Error);
  b.data_as<bf16_t>()[14] = to_bf16(3.0f);
  const Buffer copy = b.clone();
  EXPECT_EQ(to_float(copy.data_as<bf16_t>()[14]), 3.0f);
  EXPECT_TRUE(Buffer().empty());
  EXPECT_FALSE(copy.empty());
}

// Heap sizes and sizes around the point where blocks come mapped from the kernel instead (4 MiB),
// each written all over and freed before the next of the same size, so a block that reused
// dirty memory would show it: every byte, padding past the end included, must read zero.
TEST(Buffer, LargeAndSmallBlocksAreZeroedAlignedAndMovable) {
  for (const int64_t bytes :
       {int64_t{100}, int64_t{4000}, int64_t{100000}, int64_t{1} << 20, (int64_t{4} << 20) - 65,
        int64_t{4} << 20, (int64_t{9} << 20) + 3, int64_t{64} << 20}) {
    const int64_t padded = (bytes + 63) / 64 * 64 + 64;
    for (int round = 0; round < 2; ++round) {
      // Memory the heap has just been handed back dirty, likely to come back to the Buffer.
      void* dirty = std::aligned_alloc(64, static_cast<size_t>(padded));
      ASSERT_NE(dirty, nullptr);
      std::memset(dirty, 0xa5, static_cast<size_t>(padded));
      std::free(dirty);
      Buffer b(DType::u8, {bytes});
      ASSERT_EQ(reinterpret_cast<uintptr_t>(b.data()) % 64, 0u) << bytes;
      const auto* p = static_cast<const unsigned char*>(b.data());
      int64_t nonzero = 0;
      for (int64_t i = 0; i < padded; ++i) nonzero += p[i] != 0;
      EXPECT_EQ(nonzero, 0) << bytes << " bytes, round " << round;
      std::memset(b.data(), 0xa5, static_cast<size_t>(bytes));
      Buffer moved = std::move(b);
      EXPECT_EQ(moved.data_as<uint8_t>()[bytes - 1], 0xa5);
    }
  }
}

}  // namespace
}  // namespace qmoe
