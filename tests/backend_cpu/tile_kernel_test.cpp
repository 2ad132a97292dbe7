// Every instantiation of the tile kernel (each ISA this CPU runs x 4/8 bits x zero points or not,
// and MXFP4, x every token count per call) against a float64 dot product of the canonical weight,
// on one packed pair of panels. The kernels sum raw codes times activations per group and apply
// scale and zero point once per group (panel_format.hpp). Bound: f32 accumulation over K = 96 of
// raw codes times x, minus z * sum(x) once per group, times the scale once, stays below 1e-5 of the
// row's sum of |w x|; a wrong nibble, scale, zero, group sum or token is off by far more.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/isa.hpp"
#include "backend/cpu/packed_weight.hpp"
#include "support/moe_case.hpp"

namespace qmoe::cpu {
namespace {

struct KernelCase {
  Isa isa;
  int bits;
  bool zero_points;
  bool mxfp4 = false;  // e2m1 codes with e8m0 scales (bits 4, no zero points, groups of 32)
};

std::string case_text(const KernelCase& c) {
  if (c.mxfp4) return std::string(name(c.isa)) + "_mxfp4";
  return std::string(name(c.isa)) + "_int" + std::to_string(c.bits) +
         (c.zero_points ? "_zp" : "_sym");
}

void PrintTo(const KernelCase& c, std::ostream* os) { *os << case_text(c); }

QuantScheme scheme_of(const KernelCase& c, int group) {
  if (c.mxfp4) return QuantScheme{.kind = WeightKind::mxfp4, .bits = 4, .group_size = 32};
  return QuantScheme{.bits = c.bits,
                     .zero_point = c.zero_points ? ZeroPoint::explicit_ : ZeroPoint::none,
                     .group_size = group};
}

class TileKernelMatchesDot : public testing::TestWithParam<KernelCase> {};

void check_every_token_count(const KernelCase& c, int group);

// Group 32 runs the unrolled k loops only; group 6 (3 k-pairs, 6 = 4 + 2 k steps) their tails.
// MXFP4 groups are always 32.
TEST_P(TileKernelMatchesDot, EveryTokenCount) {
  for (const int group : {32, 6})
    if (!GetParam().mxfp4 || group == 32) check_every_token_count(GetParam(), group);
}

void check_every_token_count(const KernelCase& c, int group) {
  SCOPED_TRACE("group " + std::to_string(group));
  const int64_t N = kTileRows - 3, K = 96;  // three padding rows in the panel
  std::mt19937_64 rng(c.bits * 10 + c.zero_points + group + c.mxfp4 * 1000);
  const QuantScheme scheme = scheme_of(c, group);
  QuantizedWeight w = test::random_weight(1, N, K, scheme, false, rng);
  if (c.mxfp4) {
    // The e8m0 edges on rows 0-2 of every group: 2^-127 (subnormal), 2^-126, 2^73.
    uint8_t* e8m0 = w.scales.data_as<uint8_t>();
    for (int64_t g = 0; g < K / 32; ++g)
      for (int row = 0; row < 3; ++row)
        e8m0[row * (K / 32) + g] = std::array<uint8_t, 3>{0, 1, 200}[row];
  }
  const PackedMatrix packed =
      pack_weight(w, "w", 1, [&](int64_t slot) { return slot < N ? slot : int64_t{-1}; });
  const TileKernel kernel = tile_kernel(c.isa);

  std::normal_distribution<float> normal;
  const int64_t G = scheme.group_size;
  std::vector<float> x(static_cast<size_t>(kMaxTileTokens * K));
  for (float& v : x) v = normal(rng);
  std::vector<float> sums(static_cast<size_t>(kMaxTileTokens * K / G), 0.0f);
  std::vector<const float*> rows, sum_rows;
  for (int t = 0; t < kMaxTileTokens; ++t) {
    rows.push_back(x.data() + t * K);
    sum_rows.push_back(sums.data() + t * K / G);
    for (int64_t k = 0; k < K; ++k) sums[t * K / G + k / G] += x[t * K + k];
  }

  for (int tokens = 1; tokens <= kernel.max_tokens; ++tokens) {
    std::vector<float> out(static_cast<size_t>(tokens * kTileRows), NAN);
    kernel.run(packed.format,
               PanelTile{packed.panel(0, 0), rows.data(), sum_rows.data(), tokens, out.data()});
    for (int t = 0; t < tokens; ++t) {
      for (int64_t n = 0; n < kTileRows; ++n) {
        double dot = 0, magnitude = 0;
        for (int64_t k = 0; n < N && k < K; ++k) {
          dot += double(w.dequant(0, n, k)) * x[t * K + k];
          magnitude += std::abs(double(w.dequant(0, n, k)) * x[t * K + k]);
        }
        EXPECT_NEAR(out[t * kTileRows + n], dot, 1e-5 * magnitude + 1e-30)
            << "tokens " << tokens << ", token " << t << ", row " << n;
      }
    }
  }
}

// The bf16 path (where the ISA has one) on the same panels, with activations rounded to bf16 and
// the group sums it needs; same bound, since products of codes and bf16 values are exact.
class Bf16TileKernelMatchesDot : public testing::TestWithParam<KernelCase> {};

TEST_P(Bf16TileKernelMatchesDot, EveryTokenCount) {
  const KernelCase& c = GetParam();
  const TileKernel kernel = tile_kernel(c.isa);
  const int64_t N = kTileRows - 5, K = 128, G = 32;
  std::mt19937_64 rng(c.bits * 10 + c.zero_points + c.mxfp4 * 1000 + 100);
  const QuantScheme scheme = scheme_of(c, G);
  const QuantizedWeight w = test::random_weight(1, N, K, scheme, false, rng);
  const PackedMatrix packed =
      pack_weight(w, "w", 1, [&](int64_t slot) { return slot < N ? slot : int64_t{-1}; });

  std::normal_distribution<float> normal;
  std::vector<bf16_t> x(static_cast<size_t>(kMaxTileTokens * K));
  for (bf16_t& v : x) v = to_bf16(normal(rng));
  std::vector<float> sums(static_cast<size_t>(kMaxTileTokens * K / G), 0.0f);
  std::vector<const uint16_t*> rows;
  std::vector<const float*> sum_rows;
  for (int t = 0; t < kMaxTileTokens; ++t) {
    rows.push_back(&x[t * K].bits);
    sum_rows.push_back(sums.data() + t * K / G);
    for (int64_t k = 0; k < K; ++k) sums[t * K / G + k / G] += to_float(x[t * K + k]);
  }
  for (int tokens = 1; tokens <= kernel.max_tokens_bf16; ++tokens) {
    std::vector<float> out(static_cast<size_t>(tokens * kTileRows), NAN);
    kernel.run_bf16(packed.format, PanelTileBf16{packed.panel(0, 0), rows.data(), sum_rows.data(),
                                                 tokens, out.data()});
    for (int t = 0; t < tokens; ++t) {
      for (int64_t n = 0; n < kTileRows; ++n) {
        double dot = 0, magnitude = 0;
        for (int64_t k = 0; n < N && k < K; ++k) {
          const double term = double(w.dequant(0, n, k)) * to_float(x[t * K + k]);
          dot += term;
          magnitude += std::abs(term);
        }
        EXPECT_NEAR(out[t * kTileRows + n], dot, 1e-5 * magnitude + 1e-30)
            << "tokens " << tokens << ", token " << t << ", row " << n;
      }
    }
  }
}

std::vector<KernelCase> kernel_cases(bool bf16_only) {
  std::vector<KernelCase> cases;
  for (Isa isa : supported_isas()) {
    if (bf16_only && !tile_kernel(isa).run_bf16) continue;
    for (int bits : {4, 8})
      for (bool zp : {false, true}) cases.push_back({isa, bits, zp});
    cases.push_back({isa, 4, false, true});
  }
  return cases;
}

std::string case_name(const testing::TestParamInfo<KernelCase>& p) { return case_text(p.param); }

INSTANTIATE_TEST_SUITE_P(AllVariants, TileKernelMatchesDot, testing::ValuesIn(kernel_cases(false)),
                         case_name);
// Empty on CPUs without AVX-512 BF16.
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(Bf16TileKernelMatchesDot);
INSTANTIATE_TEST_SUITE_P(Bf16Variants, Bf16TileKernelMatchesDot,
                         testing::ValuesIn(kernel_cases(true)), case_name);

}  // namespace
}  // namespace qmoe::cpu
