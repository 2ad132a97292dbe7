// The cuda-mma weight layout (src/backend/cuda_mma/layout.hpp) read back byte by byte with the
// rules its comment states, against the canonical weight: every code, scale, zero and the
// act-order channel order. Needs no GPU, so CI checks the layout the kernel relies on.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <set>
#include <span>
#include <vector>

#include "backend/cuda_mma/repack.hpp"
#include "oracle/descriptor.hpp"
#include "qmoe/error.hpp"
#include "qmoe/oracle.hpp"
#include "support/moe_case.hpp"
#include "support/prepared_bytes_layers.hpp"

namespace qmoe::cuda_mma {
namespace {

using test::scheme;

// Input channel behind logical k of expert e (-1 = padding).
int64_t channel_of(const PackedWeight& p, const QuantizedWeight& w, int64_t e, int64_t k) {
  if (w.scheme.act_order) return p.k_source[size_t(e * p.shape.K_pad + k)];
  return k < w.K ? k : -1;
}

// Row and logical k of code number `i` (0..7 for int4, 0..3 per word for int8) of step word `j`
// of lane `lane` in chunk `c`, as layout.hpp describes the A fragment.
struct Place {
  int row;
  int64_t k;
};
Place place(WeightElement element, int64_t c, int lane, int j, int i) {
  const int g = lane / 4, t = lane % 4;
  int span, jj, reg, half;
  if (code_bits(element) == 4) {
    span = j / 2, jj = j % 2, reg = i % 4, half = i / 4;
  } else {
    span = 0, jj = j / 2, reg = 2 * (j % 2) + i / 2, half = i % 2;
  }
  const int64_t k_a = c * chunk_k(element) + span * kSpanK + 8 * t + 4 * jj;
  return {reg % 2 == 0 ? g : g + 8, k_a + (reg >= 2 ? 2 : 0) + half};
}

// rows: the row order given to pack_weight (empty: the weight's own).
void expect_layout_holds(const QuantizedWeight& w, std::span<const int64_t> rows = {}) {
  const PackedWeight p = pack_weight(w, "w", rows);
  const PackedWeightView& v = p.shape;
  const int bits = w.scheme.bits;
  const int64_t packed_rows = rows.empty() ? w.N : int64_t(rows.size());
  // The weight row behind packed row n, or -1.
  auto source = [&](int64_t n) -> int64_t {
    if (n >= packed_rows) return -1;
    return rows.empty() ? n : rows[size_t(n)];
  };
  const bool mxfp4 = w.scheme.kind == WeightKind::mxfp4;
  ASSERT_EQ(v.element, mxfp4       ? WeightElement::e2m1
                       : bits == 4 ? WeightElement::int4
                                   : WeightElement::int8);
  ASSERT_EQ(v.N, packed_rows);
  ASSERT_EQ(v.strips, (packed_rows + 15) / 16);
  ASSERT_EQ(v.K_pad % chunk_k(v.element), 0);
  for (int64_t e = 0; e < w.E; ++e)
    for (int64_t s = 0; s < v.strips; ++s)
      for (int64_t c = 0; c < v.chunks; ++c)
        for (int lane = 0; lane < kLanes; ++lane) {
          const uint8_t* bytes =
              p.codes.data() + (((e * v.strips + s) * v.chunks + c) * kLanes + lane) * 16;
          for (int j = 0; j < 4; ++j) {
            const uint32_t word = uint32_t(bytes[4 * j]) | uint32_t(bytes[4 * j + 1]) << 8 |
                                  uint32_t(bytes[4 * j + 2]) << 16 |
                                  uint32_t(bytes[4 * j + 3]) << 24;
            for (int i = 0; i < (bits == 4 ? 8 : 4); ++i) {
              const Place at = place(v.element, c, lane, j, i);
              const int64_t n = source(s * 16 + at.row), ch = channel_of(p, w, e, at.k);
              const uint32_t got = bits == 4 ? word >> (4 * i) & 0xf : word >> (8 * i) & 0xff;
              // int4 nibbles hold code XOR 8 (the shared order, cuda/int4_code_order.hpp)
              const uint32_t code = (n >= 0 && ch >= 0) ? uint32_t(w.code(e, n, ch)) : 0;
              const uint32_t want = v.element == WeightElement::int4 ? code ^ 8 : code;
              ASSERT_EQ(got, want) << "e " << e << " n " << n << " k " << at.k << " lane " << lane;
            }
          }
        }
  // Scales (16-bit pairs of rows g, g + 8) and zeros, per group.
  for (int64_t e = 0; e < w.E; ++e)
    for (int64_t grp = 0; grp < v.groups; ++grp)
      for (int64_t s = 0; s < v.strips; ++s)
        for (int g = 0; g < 8; ++g) {
          // Strip-major, written out here rather than through group_pair_index.
          const size_t at = size_t(((e * v.strips + s) * v.groups + grp) * 8 + g);
          for (int half = 0; half < 2; ++half) {
            const int64_t n = source(s * 16 + g + 8 * half);
            if (n < 0) continue;
            const uint16_t bits16 = uint16_t(p.scale_pairs[at] >> (16 * half));
            const float scale = v.scales_bf16 ? to_float(bf16_t{bits16}) : to_float(half_t{bits16});
            const int64_t from = (e * w.N + n) * v.groups + grp;
            if (mxfp4) {  // e8m0 byte s is 2^(s - 127), exact in bf16
              ASSERT_TRUE(v.scales_bf16);
              EXPECT_EQ(scale, std::ldexp(1.0f, int{w.scales.data_as<uint8_t>()[from]} - 127))
                  << "scale e " << e << " n " << n;
              continue;
            }
            const float want = w.scales.data_as<float>()[from];
            EXPECT_NEAR(scale, want,
                        std::abs(want) / 256)  // at most a bf16 rounding
                << "scale e " << e << " n " << n;
            if (w.scheme.has_zero_points()) {
              EXPECT_EQ(p.zero_pairs[at] >> (8 * half) & 0xff,
                        w.zeros.data_as<uint8_t>()[(e * w.N + n) * v.groups + grp]);
            }
          }
        }
  // Two padding groups after the last strip's last group, which the staged loop may load.
  const size_t groups_stored = size_t(w.E * v.strips * v.groups + 2);
  ASSERT_EQ(p.scale_pairs.size(), groups_stored * 8);
  if (w.scheme.has_zero_points()) {
    ASSERT_EQ(p.zero_pairs.size(), p.scale_pairs.size());
  }
  // Bias of every packed row: its weight row's, 0 for zero rows.
  if (w.has_bias()) {
    for (int64_t e = 0; e < w.E; ++e)
      for (int64_t n = 0; n < packed_rows; ++n) {
        const float want = source(n) < 0 ? 0.0f : w.bias.data_as<float>()[e * w.N + source(n)];
        EXPECT_EQ(p.bias[size_t(e * packed_rows + n)], want) << "bias e " << e << " n " << n;
      }
  }
  // Act-order: each expert's logical order holds every channel once, group by group, and each
  // span's recorded group is the group of its channels.
  if (w.scheme.act_order) {
    for (int64_t e = 0; e < w.E; ++e) {
      std::set<int64_t> seen;
      for (int64_t k = 0; k < v.K_pad; ++k) {
        const int64_t ch = channel_of(p, w, e, k);
        if (ch < 0) continue;
        EXPECT_TRUE(seen.insert(ch).second) << "channel " << ch << " twice";
        EXPECT_EQ(p.span_group[size_t(e * v.K_pad / kSpanK + k / kSpanK)], w.group_of(e, ch));
      }
      EXPECT_EQ(int64_t(seen.size()), w.K);
    }
  }
}

struct Case {
  const char* name;
  int bits, group;
  bool zp, act_order;
  int64_t N, K;
};
void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

class CudaMmaLayout : public testing::TestWithParam<Case> {};

TEST_P(CudaMmaLayout, EveryCodeScaleAndZeroWhereTheKernelReadsIt) {
  const Case& c = GetParam();
  std::mt19937_64 rng(5);
  expect_layout_holds(
      test::random_weight(3, c.N, c.K, scheme(c.bits, c.group, c.zp, c.act_order), false, rng));
}

INSTANTIATE_TEST_SUITE_P(
    Schemes, CudaMmaLayout,
    testing::Values(Case{"int4_g128", 4, 128, false, false, 48, 256},
                    Case{"int4_g32_asym_rows_off_strip", 4, 32, true, false, 40, 96},
                    Case{"int4_channelwise_k_off_chunk", 4, kChannelwise, false, false, 24, 200},
                    Case{"int4_act_order_g64_asym", 4, 64, true, true, 32, 192},
                    Case{"int8_g64", 8, 64, false, false, 32, 128},
                    Case{"int8_channelwise_asym_odd_k", 8, kChannelwise, true, false, 20, 70},
                    Case{"int8_act_order_g32", 8, 32, false, true, 16, 96}),
    [](const testing::TestParamInfo<Case>& p) { return std::string(p.param.name); });

// GEMM1's fused gated activation needs gate and up rows of the same outputs in one strip.
TEST(CudaMmaLayoutRules, GatedRowOrderPairsGateAndUpRowsInOneStrip) {
  const std::vector<int64_t> halves = gated_row_order(10, false);
  const std::vector<int64_t> want_halves = {0,  1,  2,  3,  4,  5,  6,  7,  10, 11, 12,
                                            13, 14, 15, 16, 17, 8,  9,  -1, -1, -1, -1,
                                            -1, -1, 18, 19, -1, -1, -1, -1, -1, -1};
  EXPECT_EQ(halves, want_halves);
  const std::vector<int64_t> interleaved = gated_row_order(3, true);
  const std::vector<int64_t> want_interleaved = {0, 2, 4, -1, -1, -1, -1, -1,
                                                 1, 3, 5, -1, -1, -1, -1, -1};
  EXPECT_EQ(interleaved, want_interleaved);
  std::mt19937_64 rng(9);
  expect_layout_holds(test::random_weight(3, 20, 96, scheme(4, 32, true, false), true, rng),
                      halves);
  expect_layout_holds(test::random_weight(2, 6, 64, scheme(8, 64, false, false), true, rng),
                      interleaved);
}

TEST(CudaMmaLayoutRules, RejectsWhatTheLayoutCannotHold) {
  std::mt19937_64 rng(3);
  EXPECT_THROW(
      pack_weight(test::random_weight(2, 16, 64, scheme(4, 16, false, false), false, rng), "w13"),
      Error);
}

// What `qmoe explain` reports as cuda-mma's copy of a layer (its descriptor's formula, from the
// shapes) is what repack makes, and the padding is the code bytes of padded rows and columns.
TEST(CudaMmaLayoutRules, DescriptorCountsThePreparedBytes) {
  for (const test::CaseSpec& spec : test::prepared_bytes_layers()) {
    const test::MoECase c = test::make_case(spec);
    SCOPED_TRACE(to_string(spec.scheme));
    const QuantizedWeight& w13 = c.experts->w13();
    const bool gated = is_gated(c.config.activation);
    const std::vector<int64_t> order =
        gated ? gated_row_order(spec.I, c.config.activation == Activation::swigluoai)
              : std::vector<int64_t>{};
    int64_t total = 0, codes = 0;
    for (const PackedWeight& p :
         {pack_weight(w13, "w13", order), pack_weight(c.experts->w2(), "w2")}) {
      total += int64_t(p.codes.size() + p.scale_pairs.size() * 4 + p.zero_pairs.size() * 2 +
                       p.bias.size() * 4 + p.k_source.size() * 4 + p.span_group.size() * 4);
      codes += int64_t(p.codes.size());
    }
    const int64_t canonical = w13.codes.nbytes() + c.experts->w2().codes.nbytes();
    const PreparedBytes counted =
        find_descriptor("cuda-mma")->prepared_bytes(describe(*c.experts, c.config));
    EXPECT_EQ(counted.total, total);
    EXPECT_EQ(counted.padding, codes - canonical);
  }
}

// MXFP4 in int4's bit layout, with every e8m0 byte that validate() accepts as a bf16 scale.
TEST(CudaMmaLayoutRules, Mxfp4CodesAndEveryE8m0Scale) {
  std::mt19937_64 rng(11);
  const QuantScheme mxfp4{.kind = WeightKind::mxfp4, .bits = 4, .group_size = 32};
  QuantizedWeight w = test::random_weight(2, 40, 96, mxfp4, true, rng);
  uint8_t* scales = w.scales.data_as<uint8_t>();
  for (int64_t i = 0; i < w.scales.numel(); ++i) scales[i] = uint8_t(i % 255);  // 0..254
  expect_layout_holds(w);
  expect_layout_holds(test::random_weight(1, 6, 64, mxfp4, false, rng), gated_row_order(3, true));
}

}  // namespace
}  // namespace qmoe::cuda_mma
