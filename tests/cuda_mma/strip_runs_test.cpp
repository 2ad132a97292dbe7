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
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "backend/cuda_mma/expert_gemm.hpp"
#include "backend/cuda_mma/repack.hpp"
#include "core/convert.hpp"
#include "cuda/gpu_test.hpp"
#include "support/moe_case.hpp"

namespace qmoe::cuda_mma {
namespace {

using test::to_device;

struct RunCase {
  const char* name;
  QuantScheme scheme;
  int64_t N, K;
  DType dtype;
  // GEMM1's form: N = 2I gate and up rows packed for the fused silu (gated_row_order), rows
  // read from tokens (two pairs per token), router weights; else GEMM2's plain rows.
  bool fused = false;
  int tile = kRunTileRows;  // above kRunTileRows: a shared tile, the strips multiplied together
};
void PrintTo(const RunCase& c, std::ostream* os) { *os << c.name; }

using StripRuns = testing::TestWithParam<RunCase>;

TEST_P(StripRuns, MatchSingleStripsAndTheFloat64Product) {
  QMOE_REQUIRE_GPU();
  const RunCase& c = GetParam();
  constexpr int64_t E = 6;
  constexpr int kTopK = 2;  // pairs per token when the rows are tokens
  std::mt19937_64 rng(0x5eed + c.N * 31 + c.K);
  const QuantizedWeight weight = test::random_weight(E, c.N, c.K, c.scheme, true, rng);
  const int64_t I = c.N / 2;
  const PackedWeight packed =
      c.fused ? pack_weight(weight, "w13", gated_row_order(I, false)) : pack_weight(weight, "w");
  DeviceBuffer codes = to_device(packed.codes), scales = to_device(packed.scale_pairs),
               zeros = to_device(packed.zero_pairs), bias = to_device(packed.bias);
  PackedWeightView view = packed.shape;
  view.codes = codes.data();
  view.scale_pairs = scales.as<uint32_t>();
  view.zero_pairs = packed.zero_pairs.empty() ? nullptr : zeros.as<uint16_t>();
  view.bias = bias.as<float>();
  // The instances' shared-memory opt-in (plan_gemm's part in a forward), and two strips per
  // warp cost no residency.
  const bool shared = c.tile >= kMinSharedTileRows;
  const int resident = resident_ctas(c.dtype, view.bits, c.tile, shared, 1);
  ASSERT_GT(resident, 0);
  EXPECT_EQ(resident_ctas(c.dtype, view.bits, c.tile, shared, 2), resident);

  // Sorted rows in tiles: up to two tiles' worth less 3 rows per expert (the last expert at
  // least one, so its last strips are read), and one tile of no expert (-1), which the kernel
  // skips.
  const int kTile = c.tile;
  std::vector<int32_t> sorted_pairs, tile_experts;
  std::vector<int64_t> row_expert;  // per sorted row
  int32_t pairs = 0;
  auto add_tile = [&](int64_t e, int rows) {
    tile_experts.push_back(int32_t(e));
    for (int i = 0; i < kTile; ++i) {
      const bool real = e >= 0 && i < rows;
      sorted_pairs.push_back(real ? pairs++ : -1);
      row_expert.push_back(real ? e : -1);
    }
  };
  for (int64_t e = 0; e < E; ++e) {
    if (e == 2) add_tile(-1, 0);
    int rows = int(rng() % uint64_t(2 * kTile - 2));
    if (e == E - 1) rows = std::max(rows, 1);
    for (int t = 0; t * kTile < rows; ++t) add_tile(e, std::min(kTile, rows - t * kTile));
  }
  for (int32_t& p : sorted_pairs)
    if (p < 0) p = pairs;  // padding rows: ids past the last pair
  const int64_t padded = int64_t(sorted_pairs.size());
  const std::vector<int32_t> padded_total{int32_t(padded)};
  // Activation row of sorted row r: the pair's token, or r itself.
  const int64_t a_rows = c.fused ? (pairs + kTopK - 1) / kTopK : padded;
  auto a_row = [&](int64_t r) { return c.fused ? sorted_pairs[size_t(r)] / kTopK : r; };
  std::vector<float> router(static_cast<size_t>(pairs));
  for (float& v : router) v = 0.5f + float(rng() % 1000) / 1000.f;

  Buffer a(c.dtype, {a_rows, c.K});
  test::fill_normal(a, rng);
  DeviceBuffer a_dev(size_t(a.nbytes())),
      pairs_dev = to_device(sorted_pairs), tiles_dev = to_device(tile_experts),
      total_dev = to_device(padded_total), router_dev = to_device(router);
  a_dev.upload(a.data(), a_dev.bytes());

  const int64_t out_cols = c.fused ? I : c.N;
  GemmProblem problem;
  problem.w = view;
  problem.a = a_dev.data();
  problem.a_stride = c.K;
  problem.a_rows_are_tokens = c.fused;
  problem.top_k = kTopK;
  problem.sorted_pair_ids = pairs_dev.as<int32_t>();
  problem.tile_experts = tiles_dev.as<int32_t>();
  problem.padded_total = total_dev.as<int32_t>();
  problem.num_pairs = pairs;
  problem.max_tiles = int64_t(tile_experts.size());
  problem.out_stride = out_cols;
  if (c.fused) {
    problem.topk_weights = router_dev.as<float>();
    problem.fuse_activation = true;
    problem.activation = Activation::silu;
    problem.act_cols = I;
  }

  auto run = [&](int strip_run) {
    Buffer out(c.dtype, {padded, out_cols});
    DeviceBuffer out_dev = test::poisoned(size_t(out.nbytes()));  // unwritten elements: NaN
    problem.out = out_dev.data();
    const GemmPlan plan{
        .tile_rows = kTile, .share_activations = shared, .strip_run = strip_run, .grid = 3};
    EXPECT_EQ(effective_strip_run(problem, plan), strip_run) << "the case must run as planned";
    EXPECT_EQ(launch_expert_gemm(problem, plan, c.dtype, nullptr), cudaSuccess);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    out_dev.download(out.data(), size_t(out.nbytes()));
    return out;
  };
  const Buffer single = run(1), paired = run(2);
  if (!shared) {
    EXPECT_EQ(std::memcmp(single.data(), paired.data(), size_t(single.nbytes())), 0);
  }

  // The real rows against float64: router weight x sum_k w * a + bias per row (then silu(gate)
  // x up when fused). One rounding (the output's), 16-bit scales and, shared, each weight times
  // its scale rounded to 16 bits (relative 2^-9 in bf16, 2^-12 in f16, independent per weight):
  // bounds 5e-3 (bf16), 1e-3 (f16).
  Buffer got(DType::f64, {pairs, out_cols}), want(DType::f64, {pairs, out_cols});
  const float* bias_host = weight.bias.data_as<float>();
  int64_t row = 0;
  for (int64_t r = 0; r < padded; ++r) {
    const int64_t e = row_expert[size_t(r)];
    if (e < 0) continue;
    const double scale = c.fused ? double(router[size_t(sorted_pairs[size_t(r)])]) : 1.0;
    auto value = [&](int64_t n) {
      double sum = 0.0;
      for (int64_t k = 0; k < c.K; ++k)
        sum +=
            double(weight.dequant(e, n, k)) * load_as_double(a.data(), c.dtype, a_row(r) * c.K + k);
      return scale * sum + bias_host[e * c.N + n];
    };
    for (int64_t o = 0; o < out_cols; ++o) {
      double v = value(o);
      if (c.fused) v = v / (1.0 + std::exp(-v)) * value(I + o);
      want.data_as<double>()[row * out_cols + o] = v;
      got.data_as<double>()[row * out_cols + o] =
          load_as_double(paired.data(), c.dtype, r * out_cols + o);
    }
    ++row;
  }
  ASSERT_GT(pairs, 0);
  EXPECT_LT(test::relative_error(got, want), c.dtype == DType::bf16 ? 5e-3 : 1e-3);
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

// plan_gemm takes runs where its wave model prefers them and their items still fill the
// resident CTAs (Qwen3-30B-A3B's GEMM2 at 32 tokens: ~112 8-row tiles x 8 runs), and never
// where a warp would have one strip (8 strips), the chunks are odd, or the run items would
// leave CTAs idle (one token).
TEST(StripRunsPlan, TakenWhereTheyPayAndNowhereElse) {
  QMOE_REQUIRE_GPU();
  PackedWeightView w;
  w.bits = 4;
  w.N = 2048, w.K = 768, w.strips = 128, w.chunks = 12, w.K_pad = 768;
  auto run = [&](int64_t M) {
    const int64_t max_tiles = align_sizes(M * 8, 128, 8).max_tiles;
    return plan_gemm(w, 8, M, 8, 128, max_tiles, DType::bf16).strip_run;
  };
  EXPECT_EQ(run(32), 2);
  EXPECT_EQ(run(1), 1);
  w.N = 128, w.strips = 8;
  EXPECT_EQ(run(32), 1);
  w.N = 2048, w.strips = 128, w.K = 704, w.chunks = 11, w.K_pad = 704;
  EXPECT_EQ(run(32), 1);
}

// Side by side at shared tiles: Mixtral-8x7B at 128 tokens (48-row tiles, ~8 of them) takes pairs
// in GEMM1 (1792 strips: 112 pair items per tile) but not in GEMM2 (256 strips: 16 per tile,
// ~130 items for 264 resident CTAs on an H200), and never for int8.
TEST(StripRunsPlan, PairsWhereSharedInt4ItemsFillTheCtas) {
  QMOE_REQUIRE_GPU();
  auto plan = [](int bits, int64_t N, int64_t K) {
    PackedWeightView w;
    w.bits = bits;
    w.N = N, w.K = K, w.K_pad = K, w.strips = N / 16, w.chunks = K / chunk_k(bits);
    w.groups = K / 128, w.spans_per_group = 4;
    const int64_t max_tiles = align_sizes(128 * 2, 8, 48).max_tiles;
    return plan_gemm(w, 48, 128, 2, 8, max_tiles, DType::bf16);
  };
  const GemmPlan w13 = plan(4, 28672, 4096), w2 = plan(4, 4096, 14336),
                 w13_int8 = plan(8, 28672, 4096);
  EXPECT_TRUE(w13.share_activations);
  EXPECT_EQ(w13.strip_run, 2);
  EXPECT_EQ(w2.strip_run, 1);
  EXPECT_EQ(w13_int8.strip_run, 1);
}

}  // namespace
}  // namespace qmoe::cuda_mma
