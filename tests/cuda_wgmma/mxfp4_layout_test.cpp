// cuda-wgmma's MXFP4 re-coding (src/backend/cuda_wgmma/mxfp4_recode.hpp) read back with an e4m3
// decoder written here from the format's definition (1 sign, 4 exponent bits biased by 7, 3
// mantissa bits; exponent 0 is subnormal, S.1111.111 is NaN): every weight, kernel scale times
// decoded code, must equal the independent reference's decoding of the canonical MXFP4 weight
// exactly, for block scales up to 2^14 apart in a window, row orders, bf16 and f16. Needs no GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <random>

#include "backend/cuda_wgmma/mxfp4_recode.hpp"
#include "sample/reference_moe.hpp"
#include "support/expect_error.hpp"
#include "support/moe_case.hpp"

namespace qmoe::cuda_wgmma {
namespace {

using test::expect_error;

const QuantScheme kMxfp4{.kind = WeightKind::mxfp4, .bits = 4, .group_size = 32};

double decode_e4m3(uint8_t byte) {
  const double sign = byte & 0x80 ? -1.0 : 1.0;
  const int exponent = (byte >> 3) & 0xF, mantissa = byte & 7;
  if (exponent == 0xF && mantissa == 7) return NAN;
  if (exponent == 0) return sign * mantissa * std::ldexp(1.0, -9);
  return sign * (1.0 + mantissa / 8.0) * std::ldexp(1.0, exponent - 7);
}

double decode_scale(uint16_t bits, DType act) {
  return act == DType::bf16 ? to_float(bf16_t{bits}) : to_float(half_t{bits});
}

// Random MXFP4 weight whose block exponents are `base` plus a uniform offset in [0, spread].
QuantizedWeight spread_weight(int64_t E, int64_t N, int64_t K, int base, int spread,
                              std::mt19937_64& rng) {
  QuantizedWeight w = test::random_weight(E, N, K, kMxfp4, false, rng);
  std::uniform_int_distribution<int> offset(0, spread);
  for (uint8_t& s : w.scales.span<uint8_t>()) s = uint8_t(base + offset(rng));
  return w;
}

void expect_exact(const QuantizedWeight& w, DType act, std::span<const int32_t> rows = {}) {
  const HostKernelWeight h = to_kernel_layout(w, act, "w", rows);
  ASSERT_EQ(h.group_size, 64);
  ASSERT_EQ(int64_t(h.codes.size()), w.E * w.N * w.K);
  ASSERT_EQ(int64_t(h.scales.size()), w.E * (w.K / 64) * w.N);
  EXPECT_TRUE(h.zero_terms.empty());
  for (int64_t e = 0; e < w.E; ++e)
    for (int64_t n = 0; n < w.N; ++n)
      for (int64_t k = 0; k < w.K; ++k) {
        const int64_t row = rows.empty() ? n : rows[size_t(e * w.N + n)];
        const double scale =
            decode_scale(h.scales[size_t((e * (w.K / 64) + k / 64) * w.N + n)], act);
        const double got = scale * decode_e4m3(h.codes[size_t((e * w.N + n) * w.K + k)]);
        ASSERT_EQ(got, sample::reference_weight(w, e, row, k))
            << "e " << e << " n " << n << " k " << k << " row " << row;
      }
}

TEST(CudaWgmmaMxfp4Layout, EveryE4m3ValueRoundTripsAndNothingElseIsExact) {
  for (int byte = 0; byte < 256; ++byte) {
    if ((byte & 0x7f) == 0x7f) continue;  // NaN
    EXPECT_EQ(e4m3_exactly(decode_e4m3(uint8_t(byte))), byte) << byte;
  }
  for (double v : {896.0, 480.0, 17.0, 0.3, std::ldexp(1.0, -10), 3 * std::ldexp(1.0, -11),
                   double(INFINITY), double(NAN)})
    EXPECT_EQ(e4m3_exactly(v), -1) << v;
}

TEST(CudaWgmmaMxfp4Layout, EvenScalesBf16) {
  std::mt19937_64 rng(1);
  expect_exact(test::random_weight(3, 48, 256, kMxfp4, false, rng), DType::bf16);
}

TEST(CudaWgmmaMxfp4Layout, ScalesFourteenApartF16WithRowOrder) {
  std::mt19937_64 rng(2);
  const QuantizedWeight w = spread_weight(2, 40, 192, 127 - 10, 14, rng);
  std::vector<int32_t> rows(size_t(w.E * w.N));
  for (int64_t e = 0; e < w.E; ++e) {
    std::iota(rows.begin() + e * w.N, rows.begin() + (e + 1) * w.N, 0);
    std::shuffle(rows.begin() + e * w.N, rows.begin() + (e + 1) * w.N, rng);
  }
  expect_exact(w, DType::f16, rows);
}

TEST(CudaWgmmaMxfp4Layout, ScalesFourteenApartBf16FarFromOne) {
  std::mt19937_64 rng(3);
  expect_exact(spread_weight(2, 16, 128, 127 - 60, 14, rng), DType::bf16);
  expect_exact(spread_weight(2, 16, 128, 127 + 50, 14, rng), DType::bf16);
}

// Below f16's normal range the window scale stays at f16's smallest subnormal, 2^-24, and the
// codes take the rest of the shift: exact while the blocks are at most 2^(s + 8) apart.
TEST(CudaWgmmaMxfp4Layout, TinyWindowsInF16KeepTheirScaleRepresentable) {
  std::mt19937_64 rng(4);
  expect_exact(spread_weight(1, 16, 128, 127 - 28, 3, rng), DType::f16);
}

TEST(CudaWgmmaMxfp4Layout, RefusesWindowsWhoseBlocksAreFifteenApart) {
  std::mt19937_64 rng(5);
  QuantizedWeight w = spread_weight(2, 16, 128, 120, 0, rng);
  uint8_t* scales = w.scales.data_as<uint8_t>() + (1 * 16 + 3) * 4;  // expert 1, row 3
  scales[2] = 120 + 15;
  expect_error([&] { to_kernel_layout(w, DType::bf16, "w2"); },
               "cuda-wgmma: mxfp4 w2 expert 1 row 3 channels 64..127: block scales 2^8 and 2^-7 "
               "are too far apart to share one scale exactly (at most 2^14 apart");
  // A block of zeros does not count.
  std::fill_n(w.codes.data_as<uint8_t>() + (1 * 16 + 3) * 64 + 2 * 16, 16, uint8_t{0});
  expect_exact(w, DType::bf16);
}

TEST(CudaWgmmaMxfp4Layout, RefusesWeightsBeyondF16) {
  std::mt19937_64 rng(6);
  const QuantizedWeight w = spread_weight(1, 16, 128, 127 + 20, 0, rng);
  expect_error([&] { to_kernel_layout(w, DType::f16, "w13"); },
               "cuda-wgmma: mxfp4 w13 expert 0 row 0 channels 0..63: weights up to 6 * 2^20 do "
               "not fit f16 activations");
  expect_exact(w, DType::bf16);
}

TEST(CudaWgmmaMxfp4Layout, RefusesW4A4) {
  std::mt19937_64 rng(7);
  QuantizedWeight w = test::random_weight(1, 16, 128, kMxfp4, false, rng);
  w.scheme.activation_quant = ActivationQuant::mxfp4;
  expect_error([&] { to_kernel_layout(w, DType::bf16, "w13"); },
               "MXFP4 activations (W4A4) run on emulation only");
}

}  // namespace
}  // namespace qmoe::cuda_wgmma
