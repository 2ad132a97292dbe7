// cuda-wgmma's host conversion (src/backend/cuda_wgmma/kernel_weight.hpp) read back with the
// rule grouped_gemm.hpp states, weight = scale16 * signed_code + zero_term, against the canonical
// weight decoded by the independent reference (sample::reference_weight). Act-order weights are
// read back through their channel order (checked here to be a permutation sorted by g_idx
// group) and row order; a host emulation of GEMM1 -> gated activation -> GEMM2 over the kernel
// layouts checks that w13's rows hand GEMM2 its input in w2's channel order. Needs no GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <span>

#include "backend/cuda_mma/repack.hpp"
#include "backend/cuda_wgmma/kernel_weight.hpp"
#include "cuda/int4_code_order.hpp"
#include "qmoe/error.hpp"
#include "sample/reference_moe.hpp"
#include "support/expect_error.hpp"
#include "support/moe_case.hpp"

namespace qmoe::cuda_wgmma {
namespace {

using test::scheme;

float from_bits(uint16_t bits, DType act) {
  return act == DType::bf16 ? to_float(bf16_t{bits}) : to_float(half_t{bits});
}

// Signed code of (e, n, k) as the kernel reads it: two's complement byte, or nibble in the order
// cuda/int4_code_order.hpp states (whose own index math is checked against CUTLASS's layout and
// cuda-mma's packing elsewhere).
int signed_code(const HostKernelWeight& h, const QuantizedWeight& w, int64_t e, int64_t n,
                int64_t k) {
  if (w.scheme.bits == 8) return int(int8_t(h.codes[size_t((e * w.N + n) * w.K + k)]));
  const int64_t at = e * w.N * w.K + int4_order::code_nibble(n, k, w.K / int4_order::kChunk);
  const uint8_t byte = h.codes[size_t(at / 2)];
  const int nibble = at % 2 == 0 ? (byte & 0xF) : (byte >> 4);
  return nibble >= 8 ? nibble - 16 : nibble;
}

// Kernel weight of kernel row n, kernel column k of expert e.
double kernel_value(const HostKernelWeight& h, const QuantizedWeight& w, DType act, int64_t e,
                    int64_t n, int64_t k) {
  const size_t at = size_t((e * w.groups() + k / h.group_size) * w.N + n);
  return double(from_bits(h.scales[at], act)) * signed_code(h, w, e, n, k) +
         (h.zero_terms.empty() ? 0.0 : double(h.zero_terms[at]));
}

// The channel order cuda-wgmma uses for w, checked against the definition: per expert a
// permutation of 0..K-1 whose position j holds a channel of g_idx group j / group_size.
std::vector<int32_t> checked_channels(const QuantizedWeight& w) {
  std::vector<int32_t> channels = kernel_channels(w, "w");
  if (!w.scheme.act_order) {
    EXPECT_TRUE(channels.empty());
    return channels;
  }
  const int64_t group = w.scheme.group_size_for(w.K);
  EXPECT_EQ(int64_t(channels.size()), w.E * w.K);
  for (int64_t e = 0; e < w.E && !testing::Test::HasFailure(); ++e) {
    std::vector<int32_t> sorted(channels.begin() + e * w.K, channels.begin() + (e + 1) * w.K);
    std::sort(sorted.begin(), sorted.end());
    for (int64_t k = 0; k < w.K; ++k) {
      EXPECT_EQ(sorted[size_t(k)], k) << "expert " << e << ": not a permutation";
      const int32_t c = channels[size_t(e * w.K + k)];
      EXPECT_EQ(w.g_idx.data_as<int32_t>()[e * w.K + c], k / group)
          << "expert " << e << " position " << k << " channel " << c;
    }
  }
  return channels;
}

// rows: the canonical row behind each kernel row (empty: the identity).
void expect_same_weights(const QuantizedWeight& w, DType act, std::span<const int32_t> rows = {}) {
  const HostKernelWeight h = to_kernel_layout(w, act, "w", rows);
  const std::vector<int32_t> channels = checked_channels(w);
  ASSERT_FALSE(testing::Test::HasFailure());
  const int64_t G = w.groups(), group = w.scheme.group_size_for(w.K);
  ASSERT_EQ(h.group_size, group);
  // The 16-bit scale is the canonical one rounded (at most 2^-8 relative in bf16, 2^-11 in f16);
  // with it, the kernel's weight must equal scale16 * (code - zero) up to float rounding: a wrong
  // code, group, row or zero is off by at least one scale.
  const double scale_tol = act == DType::bf16 ? 1.0 / 256 : 1.0 / 2048;
  const auto* scales = w.scales.data_as<float>();
  for (int64_t e = 0; e < w.E; ++e)
    for (int64_t n = 0; n < w.N; ++n)
      for (int64_t k = 0; k < w.K; ++k) {
        const int64_t row = rows.empty() ? n : rows[size_t(e * w.N + n)];
        const int64_t channel = channels.empty() ? k : channels[size_t(e * w.K + k)];
        const int64_t g =
            w.scheme.act_order ? w.g_idx.data_as<int32_t>()[e * w.K + channel] : channel / group;
        const double scale = scales[(e * w.N + row) * G + g];
        // (code - zero), an integer, from the reference's own decode
        const double units = sample::reference_weight(w, e, row, channel) / scale;
        ASSERT_NEAR(units, std::round(units), 1e-3);
        const double scale16 = from_bits(h.scales[size_t((e * G + k / group) * w.N + n)], act);
        ASSERT_LE(std::fabs(scale16 - scale), scale_tol * std::fabs(scale))
            << "e " << e << " n " << n << " k " << k;
        ASSERT_NEAR(kernel_value(h, w, act, e, n, k), std::round(units) * scale16,
                    1e-6 * std::fabs(scale16) * std::max(1.0, std::fabs(units)))
            << "e " << e << " n " << n << " k " << k << " row " << row << " channel " << channel;
      }
}

// A random row order per expert, to read rows back through.
std::vector<int32_t> random_rows(int64_t E, int64_t N, std::mt19937_64& rng) {
  std::vector<int32_t> rows(size_t(E * N));
  for (int64_t e = 0; e < E; ++e) {
    std::iota(rows.begin() + e * N, rows.begin() + (e + 1) * N, 0);
    std::shuffle(rows.begin() + e * N, rows.begin() + (e + 1) * N, rng);
  }
  return rows;
}

TEST(CudaWgmmaLayout, Int4SymmetricG128) {
  std::mt19937_64 rng(1);
  expect_same_weights(test::random_weight(3, 48, 256, scheme(4, 128), false, rng), DType::bf16);
}

TEST(CudaWgmmaLayout, Int4ZeroPointsG64F16) {
  std::mt19937_64 rng(2);
  expect_same_weights(test::random_weight(2, 48, 192, scheme(4, 64, true), false, rng), DType::f16);
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

TEST(CudaWgmmaLayout, Int4ActOrderG64ZeroPointsBf16) {
  std::mt19937_64 rng(6);
  expect_same_weights(test::random_weight(3, 48, 192, scheme(4, 64, true, true), false, rng),
                      DType::bf16);
}

TEST(CudaWgmmaLayout, Int4ActOrderG32F16WithRowOrder) {
  std::mt19937_64 rng(7);
  const QuantizedWeight w = test::random_weight(2, 32, 192, scheme(4, 32, false, true), false, rng);
  expect_same_weights(w, DType::f16, random_rows(w.E, w.N, rng));
}

TEST(CudaWgmmaLayout, Int8ActOrderG64ZeroPointsWithRowOrder) {
  std::mt19937_64 rng(8);
  const QuantizedWeight w = test::random_weight(2, 56, 128, scheme(8, 64, true, true), false, rng);
  expect_same_weights(w, DType::bf16, random_rows(w.E, w.N, rng));
}

TEST(CudaWgmmaLayout, RowOrderWithoutActOrder) {
  std::mt19937_64 rng(9);
  const QuantizedWeight w = test::random_weight(2, 32, 128, scheme(4, 64, true), false, rng);
  expect_same_weights(w, DType::bf16, random_rows(w.E, w.N, rng));
}

double silu(double x) { return x / (1.0 + std::exp(-x)); }

// The test's gated activation silu(gate) * up over GEMM1's output h, by the layouts' definition
// (qmoe/config.hpp): gate j = row j, up j = row I + j; interleaved: rows 2j, 2j + 1; in strips
// (cuda/activation.hpp): rows 16 (j / 8) + j % 8 and 8 further. Not gated: silu(h[j]).
std::vector<double> activate(const std::vector<double>& h, int64_t I, bool gated, bool interleaved,
                             bool strips = false) {
  std::vector<double> a(static_cast<size_t>(I));
  for (int64_t j = 0; j < I; ++j) {
    if (!gated)
      a[size_t(j)] = silu(h[size_t(j)]);
    else if (strips)
      a[size_t(j)] = silu(h[size_t(16 * (j / 8) + j % 8)]) * h[size_t(16 * (j / 8) + 8 + j % 8)];
    else if (interleaved)
      a[size_t(j)] = silu(h[size_t(2 * j)]) * h[size_t(2 * j + 1)];
    else
      a[size_t(j)] = silu(h[size_t(j)]) * h[size_t(I + j)];
  }
  return a;
}

// One expert's float64 forward over the canonical weights: activate(W13 x + b13) -> W2 (no b2:
// w2's rows are not reordered).
std::vector<double> reference_expert(const QuantizedExperts& x, int64_t e, bool interleaved,
                                     const std::vector<double>& in) {
  const QuantizedWeight &w13 = x.w13(), &w2 = x.w2();
  const int64_t I = x.intermediate();
  std::vector<double> h(size_t(w13.N));
  for (int64_t n = 0; n < w13.N; ++n) {
    double acc = w13.has_bias() ? w13.bias.data_as<float>()[e * w13.N + n] : 0.0;
    for (int64_t k = 0; k < w13.K; ++k) acc += sample::reference_weight(w13, e, n, k) * in[k];
    h[size_t(n)] = acc;
  }
  const std::vector<double> a = activate(h, I, x.gated(), interleaved);
  std::vector<double> out(size_t(w2.N), 0.0);
  for (int64_t m = 0; m < w2.N; ++m)
    for (int64_t j = 0; j < I; ++j) out[size_t(m)] += sample::reference_weight(w2, e, m, j) * a[j];
  return out;
}

// The same expert as cuda-wgmma runs it: the input gathered in w13's channel order, GEMM1 over
// the kernel layout of w13 (rows from w13_kernel_rows) and its bias, the same activation over
// kernel rows (in strips for int4 w13), GEMM2 over w2's kernel layout. Weights dequantized from
// the kernel layouts, in their logical channel order (the span order inside the kernels is the
// gather's and the activation's, tested on the device).
std::vector<double> kernel_expert(const QuantizedExperts& x, int64_t e, bool interleaved,
                                  const std::vector<double>& in, DType act) {
  const QuantizedWeight &w13 = x.w13(), &w2 = x.w2();
  const std::vector<int32_t> rows =
      w13_kernel_rows(x, interleaved ? Activation::swigluoai : Activation::silu);
  const HostKernelWeight k13 = to_kernel_layout(w13, act, "w13", rows);
  const HostKernelWeight k2 = to_kernel_layout(w2, act, "w2");
  const std::vector<float> bias13 = kernel_bias(w13, rows);
  const std::vector<int32_t> channels = kernel_channels(w13, "w13");
  const int64_t I = x.intermediate();
  std::vector<double> gathered(size_t(w13.K));
  for (int64_t k = 0; k < w13.K; ++k)
    gathered[size_t(k)] = in[size_t(channels.empty() ? k : channels[size_t(e * w13.K + k)])];
  std::vector<double> h(size_t(w13.N));
  for (int64_t n = 0; n < w13.N; ++n) {
    double acc = bias13.empty() ? 0.0 : bias13[size_t(e * w13.N + n)];
    for (int64_t k = 0; k < w13.K; ++k)
      acc += kernel_value(k13, w13, act, e, n, k) * gathered[size_t(k)];
    h[size_t(n)] = acc;
  }
  const std::vector<double> a = activate(h, I, x.gated(), interleaved, int4_codes(w13));
  std::vector<double> out(size_t(w2.N), 0.0);
  for (int64_t m = 0; m < w2.N; ++m)
    for (int64_t j = 0; j < I; ++j) out[size_t(m)] += kernel_value(k2, w2, act, e, m, j) * a[j];
  return out;
}

struct PipelineCase {
  const char* name;
  QuantScheme w13, w2;
  bool gated = true, interleaved = false;
};
void PrintTo(const PipelineCase& c, std::ostream* os) { *os << c.name; }

class CudaWgmmaActOrderPipeline : public testing::TestWithParam<PipelineCase> {};

// Normalized error ||kernel - reference|| / ||reference|| per expert: the kernel layouts round
// every scale to f16 (2^-11 relative) once, so the error stays near 1e-3; bound 5e-3. A row or
// channel in the wrong place mixes unrelated weights: errors of order 1.
TEST_P(CudaWgmmaActOrderPipeline, KernelLayoutsMatchTheReference) {
  const PipelineCase& c = GetParam();
  std::mt19937_64 rng(11);
  const int64_t E = 3, H = 192, I = 128;
  QuantizedExperts x(test::random_weight(E, c.gated ? 2 * I : I, H, c.w13, true, rng),
                     test::random_weight(E, H, I, c.w2, false, rng));
  std::normal_distribution<double> normal(0.0, 1.0);
  for (int64_t e = 0; e < E; ++e) {
    std::vector<double> in(static_cast<size_t>(H));
    for (double& v : in) v = normal(rng);
    const std::vector<double> want = reference_expert(x, e, c.interleaved, in);
    const std::vector<double> got = kernel_expert(x, e, c.interleaved, in, DType::f16);
    double diff = 0.0, norm = 0.0;
    for (size_t m = 0; m < want.size(); ++m) {
      diff += (got[m] - want[m]) * (got[m] - want[m]);
      norm += want[m] * want[m];
    }
    EXPECT_LT(std::sqrt(diff / norm), 5e-3) << "expert " << e;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, CudaWgmmaActOrderPipeline,
    testing::Values(
        PipelineCase{"both_act_order_halves", scheme(4, 64, true, true),
                     scheme(4, 32, false, true)},
        PipelineCase{"both_act_order_interleaved", scheme(4, 64, false, true),
                     scheme(8, 32, true, true), true, true},
        PipelineCase{"w2_only_halves", scheme(4, 64, true), scheme(4, 32, false, true)},
        PipelineCase{"w2_only_interleaved", scheme(8, 64), scheme(4, 32, true, true), true, true},
        PipelineCase{"w13_only_interleaved", scheme(4, 64, false, true), scheme(4, 32), true, true},
        PipelineCase{"int4_strips_halves", scheme(4, 64, true), scheme(4, 64)},
        PipelineCase{"int4_strips_interleaved", scheme(4, 64), scheme(4, 128, true), true, true},
        PipelineCase{"not_gated_both", scheme(4, 64, false, true), scheme(4, 32, true, true),
                     false}),
    [](const testing::TestParamInfo<PipelineCase>& p) { return std::string(p.param.name); });

// One copy of a layer's int4 codes serves cuda-mma and cuda-wgmma (Backend::prepare_beside): the
// bytes cuda-wgmma makes for w13 (rows in strips) and w2 are cuda-mma's, byte for byte.
TEST(CudaWgmmaLayout, Int4CodesAreCudaMmasBytes) {
  struct Layer {
    QuantScheme w13, w2;
    Activation activation;
  };
  std::mt19937_64 rng(12);
  const int64_t E = 3, H = 256, I = 128;
  for (const Layer& l :
       {Layer{scheme(4, 128), scheme(4, 64, true), Activation::silu},
        Layer{scheme(4, 64, true), scheme(4, kChannelwise), Activation::swigluoai},
        Layer{scheme(4, kChannelwise), scheme(4, 128), Activation::relu2_no_mul}}) {
    const bool gated = is_gated(l.activation);
    const QuantizedExperts x(test::random_weight(E, gated ? 2 * I : I, H, l.w13, false, rng),
                             test::random_weight(E, H, I, l.w2, false, rng));
    const std::vector<int32_t> rows = w13_kernel_rows(x, l.activation);
    const std::vector<int64_t> mma_rows =
        gated ? cuda_mma::gated_row_order(I, l.activation == Activation::swigluoai)
              : std::vector<int64_t>{};
    EXPECT_EQ(to_kernel_layout(x.w13(), DType::bf16, "w13", rows).codes,
              cuda_mma::pack_weight(x.w13(), "w13", mma_rows).codes)
        << name(l.activation);
    EXPECT_EQ(to_kernel_layout(x.w2(), DType::f16, "w2").codes,
              cuda_mma::pack_weight(x.w2(), "w2").codes)
        << name(l.activation);
  }
}

// An act-order weight whose expert 1 has one channel moved from group 0 into group 1.
QuantizedWeight uneven_groups(std::mt19937_64& rng) {
  QuantizedWeight w = test::random_weight(2, 16, 128, scheme(4, 64, false, true), false, rng);
  int32_t* g_idx = w.g_idx.data_as<int32_t>() + w.K;
  *std::find(g_idx, g_idx + w.K, 0) = 1;
  return w;
}

TEST(CudaWgmmaLayout, RefusesUnevenActOrderGroupsNamingTheExpertAndGroup) {
  std::mt19937_64 rng(10);
  const QuantizedWeight w = uneven_groups(rng);
  test::expect_error([&] { to_kernel_layout(w, DType::bf16, "w13"); },
                     "w13.g_idx: expert 1 has 63 channels in group 0; the cuda-wgmma backend needs "
                     "exactly the group size 64");
}

TEST(CudaWgmmaLayout, RefusesKSplitActOrderShards) {
  std::mt19937_64 rng(12);
  QuantizedWeight w = test::random_weight(1, 16, 128, scheme(4, 64, false, true), false, rng);
  w.K_full = 256;
  test::expect_error([&] { to_kernel_layout(w, DType::bf16, "w2"); },
                     "w2 is a K-split act-order shard (K = 128 of K_full = 256)");
}

// prepare() called past the oracle: the checks are host work, before anything touches the GPU.
TEST(CudaWgmmaLayout, NamesShapesTheKernelCannotTile) {
  std::mt19937_64 rng(13);
  test::expect_error(
      [&] {
        check_tileable(test::random_weight(1, 32, 96, scheme(4, 32), false, rng), DType::bf16,
                       "w13");
      },
      "cuda-wgmma: w13 has K = 96; the kernel needs a multiple of 64");
  test::expect_error(
      [&] {
        check_tileable(test::random_weight(1, 40, 128, scheme(4, 64), false, rng), DType::bf16,
                       "w2");
      },
      "cuda-wgmma: w2 has 40 output rows; the kernel needs a multiple of 16");
  test::expect_error(
      [&] {
        check_tileable(test::random_weight(1, 32, 128, scheme(4, 32), false, rng), DType::f16,
                       "w2");
      },
      "cuda-wgmma: w2 has groups of 32; the kernel needs channelwise scales or groups of a "
      "multiple of 64");
}

TEST(CudaWgmmaLayout, RefusesF32Activations) {
  std::mt19937_64 rng(5);
  const QuantizedWeight w = test::random_weight(1, 16, 128, scheme(4, 64), false, rng);
  EXPECT_THROW(to_kernel_layout(w, DType::f32, "w13"), Error);
}

}  // namespace
}  // namespace qmoe::cuda_wgmma
