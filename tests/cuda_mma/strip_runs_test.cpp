// Two strips per warp (GemmPlan::strip_run 2). At 8-row tiles a warp streams them back to back
// and must produce exactly the sums it produces strip by strip (the same mma and flush order per
// strip), so the output under a run plan is compared bit for bit with the single-strip plan, and
// both with a float64 product of the dequantized weights. At shared tiles (32 rows and more) a
// warp multiplies the two together with the scales folded into the weights (rounded to the
// activation dtype), so there the pair is held to the float64 bound alone; those cases include
// strip counts whose last pair has one strip and N tiles with warps past N. The cases move the
// run's strip boundary through the K loop: one iteration per strip (the first copies already cross
// it), iteration counts that are not multiples of the ring's 3 stages (the second strip starts at
// stage 1 or 2 and realigns before its trips), whole trips and long K;
// groups of 32 to channelwise, zero points, int4 and int8, bf16 and f16; GEMM1's fused epilogue;
// strip counts that leave the last run one strip short, a partial last strip, and 3 CTAs, so each
// walks many items.
#include <gtest/gtest.h>

#include <cstring>

#include "cuda/gpu_test.hpp"
#include "direct_gemm.hpp"

namespace qmoe::cuda_mma {
namespace {

struct RunCase {
  const char* name;
  QuantScheme scheme;
  int64_t N, K;
  DType dtype;
  bool fused = false;       // GEMM1's form (test::DirectGemmSpec)
  int tile = kRunTileRows;  // above kRunTileRows: a shared tile, the strips multiplied together
};
void PrintTo(const RunCase& c, std::ostream* os) { *os << c.name; }

using StripRuns = testing::TestWithParam<RunCase>;

TEST_P(StripRuns, MatchSingleStripsAndTheFloat64Product) {
  QMOE_REQUIRE_GPU();
  const RunCase& c = GetParam();
  test::DirectGemm gemm(
      {.scheme = c.scheme, .N = c.N, .K = c.K, .dtype = c.dtype, .fused = c.fused, .tile = c.tile});
  // Two strips per warp cost no residency.
  const bool shared = c.tile >= kMinSharedTileRows;
  const Variant variant{gemm.problem.w.element, c.dtype};
  EXPECT_EQ(resident_ctas(variant, c.tile, shared, 2), resident_ctas(variant, c.tile, shared, 1));
  auto run = [&](int strip_run) {
    const GemmPlan plan{
        .tile_rows = c.tile, .share_activations = shared, .strip_run = strip_run, .grid = 3};
    EXPECT_EQ(effective_strip_run(gemm.problem, plan), strip_run) << "the case must run as planned";
    return gemm.run(plan);
  };
  const Buffer single = run(1), paired = run(2);
  if (!shared) {
    EXPECT_EQ(std::memcmp(single.data(), paired.data(), size_t(single.nbytes())), 0);
  }
  // One rounding (the output's), 16-bit scales and, shared, each weight times its scale rounded
  // to 16 bits (relative 2^-9 in bf16, 2^-12 in f16, independent per weight): bounds 5e-3
  // (bf16), 1e-3 (f16).
  EXPECT_LT(gemm.error_against_float64(paired), c.dtype == DType::bf16 ? 5e-3 : 1e-3);
}

using test::scheme;
constexpr DType bf16 = DType::bf16, f16 = DType::f16;

INSTANTIATE_TEST_SUITE_P(
    Cases, StripRuns,
    testing::Values(
        // 16 chunks: two whole trips per strip, then singles across the boundary; 17 strips,
        // the last partial (264 rows) and alone in its run.
        RunCase{"int4_g128_k1024_n264", scheme(4, 128), 264, 1024, bf16},
        // 2 chunks: one iteration per strip, so the prologue's copies already cross it.
        RunCase{"int4_g32_asym_k128_n200_f16", scheme(4, 32, true), 200, 128, f16},
        // 6 chunks: three single iterations per strip, ending at stage 0; 33 strips.
        RunCase{"int4_channelwise_k384_n520", scheme(4, kChannelwise), 520, 384, bf16},
        // 10 chunks: five iterations, the second strip starts at stage 2.
        RunCase{"int4_g64_k640_n48", scheme(4, 64), 48, 640, bf16},
        RunCase{"int4_g64_k2048_n96", scheme(4, 64), 96, 2048, f16},
        RunCase{"int8_g64_asym_k384_n136", scheme(8, 64, true), 136, 384, bf16},
        RunCase{"int8_g128_k256_n48_f16", scheme(8, 128), 48, 256, f16},
        // int8 at one iteration per strip (2 chunks of 32): the prologue's copies cross it.
        RunCase{"int8_g32_asym_k64_n72_f16", scheme(8, 32, true), 72, 64, f16},
        // GEMM1's form (silu of gate and up rows, router weights, token rows): I = 100 is 13
        // strips, the last half empty, so the last run is one strip and its outputs stop at
        // act_cols.
        RunCase{"int4_g128_fused_k512_i100", scheme(4, 128), 200, 512, bf16, true},
        RunCase{"int4_g64_asym_fused_k256_i100_f16", scheme(4, 64, true), 200, 256, f16, true},
        // Channelwise with zero points: one group per strip, its zero pair changes at the end.
        RunCase{"int4_channelwise_asym_k640_n520", scheme(4, kChannelwise, true), 520, 640, bf16}),
    [](const testing::TestParamInfo<RunCase>& p) { return std::string(p.param.name); });

// Pairs at shared int4 tiles. 17 strips: the last pair is one strip (the warp reads the first
// strip's codes twice); 3 strips at 32 rows: warps 2-7 of the one N tile lie past N and still
// copy their share of the activations; 13 strips of GEMM1's fused form; g32 to channelwise, zero
// points, bf16 and f16.
INSTANTIATE_TEST_SUITE_P(
    Pairs, StripRuns,
    testing::Values(
        RunCase{"int4_g128_k1024_n264_t48", scheme(4, 128), 264, 1024, bf16, false, 48},
        RunCase{"int4_g32_asym_k128_n200_f16_t32", scheme(4, 32, true), 200, 128, f16, false, 32},
        RunCase{"int4_channelwise_k384_n520_t64", scheme(4, kChannelwise), 520, 384, bf16, false,
                64},
        RunCase{"int4_g64_k640_n48_t32", scheme(4, 64), 48, 640, bf16, false, 32},
        RunCase{"int4_g64_k2048_n96_f16_t64", scheme(4, 64), 96, 2048, f16, false, 64},
        RunCase{"int4_g128_fused_k512_i100_t48", scheme(4, 128), 200, 512, bf16, true, 48},
        RunCase{"int4_g64_asym_fused_k256_i100_f16_t48", scheme(4, 64, true), 200, 256, f16, true,
                48},
        RunCase{"int4_channelwise_asym_k640_n520_t32", scheme(4, kChannelwise, true), 520, 640,
                bf16, false, 32}),
    [](const testing::TestParamInfo<RunCase>& p) { return std::string(p.param.name); });

// Pairs at shared tiles whose expert's last tile holds rows in 1 to all of its fragments of 8:
// at 32 and 48 rows the two loops compiled for one and two fragments fewer (staged_dispatch) and
// the full one, at 64 the full one with empty fragments, each against the float64 product. A loop
// that multiplied too few fragments, or the wrong ones, would leave whole token rows wrong (~0.1 of
// the relative error, the bound 5e-3).
TEST(StripRuns, PairTilesWithEveryCountOfLiveFragments) {
  QMOE_REQUIRE_GPU();
  for (const int tile : {32, 48, 64}) {
    // Expert f - 1: a full tile, then a tile whose rows end in fragment f (at a different row
    // of it each time); the last expert only a partial tile.
    std::vector<int> rows;
    for (int f = 1; f <= tile / 8; ++f) rows.push_back(tile + 8 * (f - 1) + 1 + (f * 3) % 8);
    rows.push_back(tile - 8 + 2);
    for (const bool fused : {false, true}) {
      SCOPED_TRACE(testing::Message() << "tile " << tile << (fused ? " fused" : ""));
      test::DirectGemm gemm({.scheme = scheme(4, fused ? 64 : 128),
                             .N = fused ? 200 : 264,
                             .K = 512,
                             .dtype = fused ? f16 : bf16,
                             .fused = fused,
                             .tile = tile,
                             .expert_rows = rows});
      const GemmPlan plan{.tile_rows = tile, .share_activations = true, .strip_run = 2, .grid = 3};
      ASSERT_EQ(effective_strip_run(gemm.problem, plan), 2);
      EXPECT_LT(gemm.error_against_float64(gemm.run(plan)), fused ? 1e-3 : 5e-3);
    }
  }
}

// plan_gemm takes runs where its wave model prefers them and their items still fill the
// resident CTAs (Qwen3-30B-A3B's GEMM2 at 32 tokens: ~112 8-row tiles x 8 runs), and never
// where a warp would have one strip (8 strips), the chunks are odd, or the run items would
// leave CTAs idle (one token).
TEST(StripRunsPlan, TakenWhereTheyPayAndNowhereElse) {
  QMOE_REQUIRE_GPU();
  PackedWeightView w;
  w.element = WeightElement::int4;
  w.N = 2048, w.K = 768, w.strips = 128, w.chunks = 12, w.K_pad = 768;
  auto run = [&](int64_t M) {
    const int64_t max_tiles = align_sizes(M * 8, 128, 8).max_tiles;
    return plan_gemm(w, 8, M, 8, 128, max_tiles, DType::bf16).strip_run;
  };
  EXPECT_EQ(run(32), 2);
  EXPECT_EQ(run(1), 1);
  EXPECT_EQ(plan_gemm(w, 8, 1, 8, 128, 8, DType::bf16).tail_parts, 1);  // never at 8 rows
  w.N = 128, w.strips = 8;
  EXPECT_EQ(run(32), 1);
  w.N = 2048, w.strips = 128, w.K = 704, w.chunks = 11, w.K_pad = 704;
  EXPECT_EQ(run(32), 1);
}

// Side by side at shared tiles: Mixtral-8x7B at 128 tokens (48-row tiles, ~8 of them) takes pairs
// in GEMM1 (1792 strips: 3.4 rounds of pair items against 6.8 of single strips on an H200's 264
// resident CTAs) and in GEMM2 (256 strips: ~130 pair items, split in two along K, against ~260
// single items, one round), not for a layer of 16 strips (too few items to share: the plan
// splits K across warps), never for int8, and not where folding would put bf16 scales into f16.
TEST(StripRunsPlan, PairsWhereTheirRoundsCostLess) {
  QMOE_REQUIRE_GPU();
  auto plan = [](int bits, int64_t N, int64_t K, DType dtype = DType::bf16,
                 bool scales_bf16 = true) {
    PackedWeightView w;
    w.element = bits == 4 ? WeightElement::int4 : WeightElement::int8;
    w.scales_bf16 = scales_bf16;
    w.N = N, w.K = K, w.K_pad = K, w.strips = N / 16, w.chunks = K / chunk_k(w.element);
    w.groups = K / 128, w.spans_per_group = 4;
    const int64_t max_tiles = align_sizes(128 * 2, 8, 48).max_tiles;
    return plan_gemm(w, 48, 128, 2, 8, max_tiles, dtype);
  };
  const GemmPlan w13 = plan(4, 28672, 4096), w2 = plan(4, 4096, 14336),
                 narrow = plan(4, 256, 14336), w13_int8 = plan(8, 28672, 4096);
  EXPECT_TRUE(w13.share_activations);
  EXPECT_EQ(w13.strip_run, 2);
  EXPECT_EQ(w13.tail_parts, kMaxTailParts);  // shared tiles split their last round
  EXPECT_EQ(w2.strip_run, 2);
  // GEMM2's ~128 items take every resident CTA, so the kernel can split them in two.
  EXPECT_EQ(w2.grid, resident_ctas({WeightElement::int4, DType::bf16}, 48, true, 2));
  EXPECT_FALSE(narrow.share_activations);
  EXPECT_EQ(narrow.strip_run, 1);
  EXPECT_EQ(w13_int8.strip_run, 1);
  // Scales are folded into the weights in the activation dtype: f16 scales into bf16 fold,
  // bf16 scales into f16 (whose range is narrower) do not.
  EXPECT_EQ(plan(4, 28672, 4096, DType::bf16, false).strip_run, 2);
  EXPECT_EQ(plan(4, 28672, 4096, DType::f16, false).strip_run, 2);
  EXPECT_EQ(plan(4, 28672, 4096, DType::f16, true).strip_run, 1);
}

}  // namespace
}  // namespace qmoe::cuda_mma
