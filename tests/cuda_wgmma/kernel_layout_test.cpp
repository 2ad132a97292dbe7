// cuda-wgmma's host conversion (src/backend/cuda_wgmma/kernel_weight.hpp) read back with the
// rule grouped_gemm.hpp states, weight = scale16 * signed_code + zero_term, against the canonical
// weight's own fields: (code - zero) * scale. Needs no GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "backend/cuda_wgmma/kernel_weight.hpp"
#include "qmoe/error.hpp"
#include "support/moe_case.hpp"

namespace qmoe::cuda_wgmma {
namespace {

using test::scheme;

float from_bits(uint16_t bits, DType act) {
  return act == DType::bf16 ? to_float(bf16_t{bits}) : to_float(half_t{bits});
}

// Signed code of (e, n, k) as the kernel reads it: two's complement nibble or byte.
int signed_code(const HostKernelWeight& h, const QuantizedWeight& w, int64_t e, int64_t n,
                int64_t k) {
  if (w.scheme.bits == 8) return int(int8_t(h.codes[size_t((e * w.N + n) * w.K + k)]));
  const uint8_t byte = h.codes[size_t((e * w.N + n) * (w.K / 2) + k / 2)];
  const int nibble = k % 2 == 0 ? (byte & 0xF) : (byte >> 4);
  return nibble >= 8 ? nibble - 16 : nibble;
}

void expect_same_weights(const QuantizedWeight& w, DType act) {
  const HostKernelWeight h = to_kernel_layout(w, act, "w");
  const int64_t G = w.groups(), group = w.scheme.group_size_for(w.K);
  ASSERT_EQ(h.group_size, group);
  // The 16-bit scale is the canonical one rounded (at most 2^-8 relative in bf16, 2^-11 in f16);
  // with it, the kernel's weight must equal scale16 * (code - zero) up to float rounding: a wrong
  // code, group or zero is off by at least one scale.
  const double scale_tol = act == DType::bf16 ? 1.0 / 256 : 1.0 / 2048;
  const auto* scales = w.scales.data_as<float>();
  const auto* zeros = w.scheme.has_zero_points() ? w.zeros.data_as<uint8_t>() : nullptr;
  const auto* codes = w.codes.data_as<uint8_t>();
  for (int64_t e = 0; e < w.E; ++e)
    for (int64_t n = 0; n < w.N; ++n)
      for (int64_t k = 0; k < w.K; ++k) {
        const int64_t g = k / group;
        const float scale = scales[(e * w.N + n) * G + g];
        const int zero = zeros ? zeros[(e * w.N + n) * G + g] : 1 << (w.scheme.bits - 1);
        const int code = w.scheme.bits == 8
                             ? codes[(e * w.N + n) * w.K + k]
                             : (codes[(e * w.N + n) * (w.K / 2) + k / 2] >> (4 * (k % 2))) & 0xF;
        const size_t at = size_t((e * G + g) * w.N + n);
        const double scale16 = from_bits(h.scales[at], act);
        ASSERT_LE(std::fabs(scale16 - scale), scale_tol * std::fabs(scale))
            << "e " << e << " n " << n;
        const double got =
            scale16 * signed_code(h, w, e, n, k) + (zeros ? double(h.zero_terms[at]) : 0.0);
        ASSERT_NEAR(got, double(code - zero) * scale16, 1e-6 * std::fabs(scale16))
            << "e " << e << " n " << n << " k " << k << " code " << code << " zero " << zero;
      }
}

TEST(CudaWgmmaLayout, Int4SymmetricG128) {
  std::mt19937_64 rng(1);
  expect_same_weights(test::random_weight(3, 48, 256, scheme(4, 128), false, rng), DType::bf16);
}

TEST(CudaWgmmaLayout, Int4ZeroPointsG64F16) {
  std::mt19937_64 rng(2);
  expect_same_weights(test::random_weight(2, 40, 192, scheme(4, 64, true), false, rng), DType::f16);
}

TEST(CudaWgmmaLayout, Int8ZeroPointsChannelwise) {
  std::mt19937_64 rng(3);
  expect_same_weights(test::random_weight(2, 24, 128, scheme(8, kChannelwise, true), false, rng),
                      DType::bf16);
}

TEST(CudaWgmmaLayout, Int8SymmetricG128F16) {
  std::mt19937_64 rng(4);
  expect_same_weights(test::random_weight(2, 16, 256, scheme(8, 128), false, rng), DType::f16);
}

TEST(CudaWgmmaLayout, RefusesActOrderAndF32) {
  std::mt19937_64 rng(5);
  const QuantizedWeight ao =
      test::random_weight(1, 16, 128, scheme(4, 64, false, true), false, rng);
  EXPECT_THROW(to_kernel_layout(ao, DType::bf16, "w13"), Error);
  const QuantizedWeight w = test::random_weight(1, 16, 128, scheme(4, 64), false, rng);
  EXPECT_THROW(to_kernel_layout(w, DType::f32, "w13"), Error);
}

}  // namespace
}  // namespace qmoe::cuda_wgmma
