// The int4 code order cuda-mma and cuda-wgmma share (cuda/int4_code_order.hpp) against the layout
// CUTLASS's mainloop is given for the codes (code_order.hpp's code_layout, built from CUTLASS's
// reordering atom): at every row and column of a few shapes, the nibble CUTLASS reads for (n, q)
// is the one the shared order gives channel span_column_k(q) of row n. The bytes themselves are
// cuda-mma's (kernel_layout_test.cpp), so this is what lets cuda-wgmma multiply cuda-mma's codes.
// Host code only: no GPU needed.
#include <gtest/gtest.h>

#include <cutlass/numeric_types.h>

#include <set>

#include "backend/cuda_wgmma/code_order.hpp"

namespace qmoe::cuda_wgmma {
namespace {

template <class Mma>
void expect_shared_order(int N, int K) {
  const auto layout = code_layout<Mma>(N, K);
  for (int n = 0; n < N; ++n)
    for (int q = 0; q < K; ++q) {
      const int k = q / int4_order::kSpan * int4_order::kSpan +
                    int4_order::span_column_k(q % int4_order::kSpan);
      ASSERT_EQ(int64_t(layout(n, q, 0)), int4_order::code_nibble(n, k, K / int4_order::kChunk))
          << "N " << N << " K " << K << " row " << n << " column " << q;
    }
}

TEST(SharedInt4Order, CutlassReadsWhereTheSharedOrderPuts) {
  for (const auto [N, K] : {std::pair{16, 64}, {48, 192}, {256, 128}, {32, 2048}}) {
    expect_shared_order<cutlass::bfloat16_t>(N, K);
    expect_shared_order<cutlass::half_t>(N, K);
  }
}

TEST(SharedInt4Order, SpanOrderIsAPermutationWithItsInverse) {
  std::set<int> channels;
  for (int q = 0; q < int4_order::kSpan; ++q) {
    const int k = int4_order::span_column_k(q);
    channels.insert(k);
    EXPECT_EQ(int4_order::span_k_column(k), q);
  }
  EXPECT_EQ(channels.size(), size_t(int4_order::kSpan));
  EXPECT_EQ(*channels.rbegin(), int4_order::kSpan - 1);
}

}  // namespace
}  // namespace qmoe::cuda_wgmma
