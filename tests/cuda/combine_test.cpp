// GPU weighted sum over top-k against a double-precision sum.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "cuda/combine.hpp"
#include "gpu_test.hpp"
#include "half_data.hpp"

namespace qmoe::test {
namespace {

struct CombineCase {
  int64_t M, k, H;
  DType dtype = DType::bf16;
  bool weights = true;    // false: weights already applied
  bool permuted = false;  // rows of `in` in a shuffled order given by pair_rows
  double dropped = 0.0;   // fraction of pairs with pair_rows = -1 (experts on other ranks)
  int64_t pad = 0;        // extra elements per row of in and out
};

void run_case(const CombineCase& c, uint64_t seed) {
  SCOPED_TRACE(::testing::Message() << "M " << c.M << " k " << c.k << " H " << c.H << " "
                                    << name(c.dtype) << " weights " << c.weights << " permuted "
                                    << c.permuted << " dropped " << c.dropped << " pad " << c.pad);
  std::mt19937_64 rng(seed);
  const int64_t pairs = c.M * c.k, in_stride = c.H + c.pad, out_stride = c.H + c.pad;
  const HalfData in = random_half(c.dtype, pairs * in_stride, rng, 1.0f);
  std::vector<float> w(pairs);
  std::uniform_real_distribution<float> uniform(0.05f, 1.0f);
  for (float& x : w) x = uniform(rng);
  std::vector<int32_t> rows(pairs);
  std::iota(rows.begin(), rows.end(), 0);
  if (c.permuted) std::shuffle(rows.begin(), rows.end(), rng);
  // A dropped pair's row is filled with NaN: reading it would poison the sum.
  std::vector<uint16_t> in_bits = in.bits;
  std::bernoulli_distribution drop(c.dropped);
  for (int32_t& r : rows)
    if (drop(rng)) {
      std::fill_n(&in_bits[r * in_stride], c.H, uint16_t{0xffff});
      r = -1;
    }
  const bool use_rows = c.permuted || c.dropped > 0;

  DeviceBuffer in_d = to_device(in_bits), w_d = to_device(w), rows_d = to_device(rows);
  DeviceBuffer out_d = poisoned(c.M * out_stride * 2);
  QMOE_CUDA_CHECK(combine_topk_cuda(
      c.dtype, in_d.data(), in_stride, use_rows ? rows_d.as<int32_t>() : nullptr,
      c.weights ? w_d.as<float>() : nullptr, c.M, c.k, c.H, out_d.data(), out_stride, nullptr));
  const auto out = to_host<uint16_t>(out_d, c.M * out_stride);

  // fp32 accumulation adds at most ~k * 2^-24 of sum |w x|; the result is rounded once (half an
  // ulp relative, or half a subnormal step absolute). Rows whose pairs were all dropped are 0.
  // Beyond the bound, the sum order is part of the contract (a forward is bitwise repeatable
  // and independent of how the kernel batches rows): the result must equal, bit for bit, the
  // fp32 fmaf chain over the pairs in order, rounded once.
  int failures = 0, order_failures = 0;
  for (int64_t m = 0; m < c.M; ++m)
    for (int64_t h = 0; h < c.H; ++h) {
      double want = 0.0, magnitude = 0.0;
      float chain = 0.0f;
      for (int64_t j = 0; j < c.k; ++j) {
        const int64_t pair = m * c.k + j;
        const int64_t row = use_rows ? rows[pair] : pair;
        if (row < 0) continue;
        const double x = in.values[row * in_stride + h];
        const double term = (c.weights ? w[pair] : 1.0) * x;
        want += term;
        magnitude += std::fabs(term);
        chain = std::fmaf(c.weights ? w[pair] : 1.0f, float(x), chain);
      }
      const uint16_t bits = out[m * out_stride + h];
      const double got = half_value(c.dtype, bits);
      const double bound = 1.01 * half_ulp(c.dtype) * std::fabs(want) + 1e-6 * magnitude +
                           half_subnormal_step(c.dtype);
      if (!(std::fabs(got - want) <= bound) && failures++ < 5)
        ADD_FAILURE() << "m " << m << " h " << h << ": " << got << " vs " << want;
      if (bits != half_bits(c.dtype, chain) && order_failures++ < 5)
        ADD_FAILURE() << "m " << m << " h " << h << ": bits " << bits << ", the in-order fp32 sum "
                      << "rounds to " << half_bits(c.dtype, chain);
    }
  EXPECT_EQ(failures, 0);
  EXPECT_EQ(order_failures, 0);
}

TEST(CudaCombine, WeightedSumAcrossShapes) {
  QMOE_REQUIRE_GPU();
  uint64_t seed = 1;
  for (int64_t k : {1, 2, 6, 8})
    for (int64_t M : {1, 3, 64, 1000})
      for (int64_t H : {1, 7, 256, 2048, 4104})
        for (DType t : {DType::bf16, DType::f16}) {
          if (M * H > 1000 * 2048) continue;
          run_case({.M = M, .k = k, .H = H, .dtype = t}, seed++);
        }
  run_case({.M = 8192, .k = 8, .H = 64}, seed++);
  // More than one batch of rows per token (the kernel reads 8 at a time), the last one partial.
  run_case({.M = 5, .k = 19, .H = 2048}, seed++);
  run_case({.M = 3, .k = 9, .H = 7, .dtype = DType::f16, .weights = false}, seed++);
  run_case({.M = 40, .k = 16, .H = 264, .permuted = true, .dropped = 0.4}, seed++);
}

TEST(CudaCombine, WeightsAlreadyApplied) {
  QMOE_REQUIRE_GPU();
  run_case({.M = 33, .k = 6, .H = 512, .weights = false}, 50);
  run_case({.M = 33, .k = 1, .H = 9, .dtype = DType::f16, .weights = false}, 51);
}

TEST(CudaCombine, RowsInSortedOrderWithDroppedPairs) {
  QMOE_REQUIRE_GPU();
  run_case({.M = 200, .k = 8, .H = 1024, .permuted = true}, 60);
  run_case({.M = 200, .k = 8, .H = 1024, .permuted = true, .dropped = 0.5}, 61);
  run_case({.M = 50, .k = 2, .H = 72, .dropped = 0.7, .pad = 8}, 62);
  run_case({.M = 50, .k = 1, .H = 13, .dtype = DType::f16, .dropped = 1.0, .pad = 3}, 63);
}

TEST(CudaCombine, RejectsOtherDtypes) {
  EXPECT_EQ(
      combine_topk_cuda(DType::f32, nullptr, 1, nullptr, nullptr, 1, 1, 1, nullptr, 1, nullptr),
      cudaErrorInvalidValue);
}

}  // namespace
}  // namespace qmoe::test
