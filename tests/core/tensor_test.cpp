#include <gtest/gtest.h>

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

}  // namespace
}  // namespace qmoe
