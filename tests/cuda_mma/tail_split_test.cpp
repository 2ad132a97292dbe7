// The last round of work items split along K across CTAs (GemmPlan::tail_parts, tail_split.cuh).
// Each case picks a grid that leaves a partial last round whose items split into the wanted
// parts, then checks: the output against the float64 product (the same bounds as unsplit), two
// launches bit for bit (the partial sums are added in a fixed order), exactly the expected
// producer slots written (the rest of the buffer still NaN), and every flag back at zero (the
// next launch's starting state). Only tiles of 32 rows and more split (kMinSharedTileRows). Cases:
// two strips per warp at 48 and 64 rows, a K split across warps at 32 rows (the shared-memory sum
// of slices), one strip per warp at 64 rows, int8, zero points, f16, GEMM1's fused epilogue,
// parts capped by a warp's iterations and by the buffer.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "cuda/gpu_test.hpp"
#include "direct_gemm.hpp"

namespace qmoe::cuda_mma {
namespace {

struct TailCase {
  const char* name;
  test::DirectGemmSpec spec;
  GemmPlan plan;  // grid is chosen by the test
  int want_parts;
  int64_t slots = 0;  // producer slots the buffer holds; 0: as many as the split needs
  // A grid above the item count: no whole round, every item split (Mixtral M = 128's GEMM2).
  bool grid_above_items = false;
};
void PrintTo(const TailCase& c, std::ostream* os) { *os << c.name; }

// The split the kernel must make, restated: at tiles of kMinSharedTileRows rows and more, items
// past the last whole round of `grid`, each cut into the most parts (at most kMaxTailParts) that
// the idle CTAs, a warp's iterations and the slots allow.
struct Split {
  int64_t tail, parts;
};
Split expected_split(int tile, int64_t items, int64_t grid, int64_t iterations, int64_t slots) {
  const int64_t tail = items % grid;
  if (tail == 0 || tile < kMinSharedTileRows) return {tail, 1};
  int64_t parts = std::min({int64_t(kMaxTailParts), grid / tail, iterations});
  while (parts > 1 && tail * (parts - 1) > slots) --parts;
  return {tail, std::max<int64_t>(parts, 1)};
}

using TailSplit = testing::TestWithParam<TailCase>;

TEST_P(TailSplit, MatchesTheFloat64ProductDeterministically) {
  QMOE_REQUIRE_GPU();
  const TailCase& c = GetParam();
  test::DirectGemm gemm(c.spec);
  const PackedWeightView& w = gemm.problem.w;
  GemmPlan plan = c.plan;
  const int strips_per_warp = plan.share_activations ? plan.strip_run : 1;
  const int64_t items = gemm.tiles() * ((w.strips + plan.strips_per_cta * plan.strip_run - 1) /
                                        (plan.strips_per_cta * plan.strip_run));
  const int per_iter = code_bits(w.element) == 8 ? 2 : 1;  // chunks_per_iteration at 32+ rows
  const int64_t per_warp = (w.chunks + plan.warps_k * per_iter - 1) / (plan.warps_k * per_iter);
  const int64_t slot_bytes = 8 * strips_per_warp * (c.spec.tile / 8) * 32 * 16;
  const int64_t enough = 1024;

  // The largest grid below the item count (or, grid_above_items, up to the resident CTAs) that
  // makes the wanted split (and, with few slots, one the slots cap: more parts would fit the idle
  // CTAs).
  const int resident =
      resident_ctas({w.element, c.spec.dtype}, c.spec.tile, plan.share_activations, plan.strip_run);
  auto split_at = [&](int64_t grid, int64_t slots) {
    return expected_split(c.spec.tile, items, grid, per_warp, slots);
  };
  const int64_t lowest = c.grid_above_items ? items + 1 : 2;
  plan.grid = 0;
  for (int64_t grid = c.grid_above_items ? resident : std::min<int64_t>(items - 1, resident);
       grid >= lowest && !plan.grid; --grid)
    if (split_at(grid, c.slots ? c.slots : enough).parts == c.want_parts &&
        (!c.slots || split_at(grid, enough).parts > c.want_parts))
      plan.grid = int(grid);
  ASSERT_GT(plan.grid, 0) << items << " items allow no grid with " << c.want_parts << " parts";
  const Split split = split_at(plan.grid, c.slots ? c.slots : enough);
  const int64_t producers = split.tail * (split.parts - 1);

  plan.tail_parts = 1;  // unsplit, before the buffers exist
  const Buffer whole = gemm.run(plan);
  const double bound = c.spec.dtype == DType::bf16 ? 5e-3 : 1e-3;
  EXPECT_LT(gemm.error_against_float64(whole), bound);

  const int64_t slots = c.slots ? c.slots : producers + 1;
  DeviceBuffer partials = test::poisoned(size_t(slots * slot_bytes));
  DeviceBuffer flags = test::to_device(std::vector<int32_t>(size_t(slots), 0));
  gemm.problem.tail_partials = partials.as<float>();
  gemm.problem.tail_partial_bytes = slots * slot_bytes;
  gemm.problem.tail_flags = flags.as<int32_t>();
  gemm.problem.tail_slots = slots;
  plan.tail_parts = kMaxTailParts;
  const Buffer first = gemm.run(plan);
  EXPECT_LT(gemm.error_against_float64(first), bound);

  // Producer slots [0, producers) written, the rest untouched (still the poison's all-ones
  // words). Not "finite": the sums of token columns past a tile's last pair come from whatever
  // the ring held there and are never stored, in the output or from a slot.
  const std::vector<uint32_t> stored =
      test::to_host<uint32_t>(partials, size_t(slots * slot_bytes / int64_t(sizeof(uint32_t))));
  const int64_t per_slot = slot_bytes / int64_t(sizeof(uint32_t));
  auto poison = [](uint32_t v) { return v == 0xffffffffu; };
  for (int64_t s = 0; s < slots; ++s) {
    const auto begin = stored.begin() + s * per_slot, end = begin + per_slot;
    if (s < producers)
      EXPECT_TRUE(std::none_of(begin, end, poison)) << "slot " << s;
    else
      EXPECT_TRUE(std::all_of(begin, end, poison)) << "slot " << s;
  }
  const std::vector<int32_t> left = test::to_host<int32_t>(flags, size_t(slots));
  EXPECT_TRUE(std::all_of(left.begin(), left.end(), [](int32_t f) { return f == 0; }));

  // Poisoned again, so a last part that read a slot before its producer wrote it would show.
  QMOE_CUDA_CHECK(cudaMemset(partials.data(), 0xff, partials.bytes()));
  const Buffer second = gemm.run(plan);
  EXPECT_EQ(std::memcmp(first.data(), second.data(), size_t(first.nbytes())), 0);
}

using test::scheme;
constexpr DType bf16 = DType::bf16, f16 = DType::f16;
constexpr GemmPlan kPairs{
    .tile_rows = 48, .strips_per_cta = 8, .warps_k = 1, .share_activations = true, .strip_run = 2};

INSTANTIATE_TEST_SUITE_P(
    Cases, TailSplit,
    testing::Values(
        // Mixtral's GEMM1 form at 128 tokens: pairs at 48 rows, 17 strips (the last pair one).
        TailCase{"int4_g128_pairs_t48",
                 {.scheme = scheme(4, 128), .N = 264, .K = 1024, .dtype = bf16, .tile = 48},
                 kPairs,
                 2},
        // The same with a buffer of 3 slots: fewer parts than the idle CTAs would take.
        TailCase{"int4_g128_pairs_t48_few_slots",
                 {.scheme = scheme(4, 128), .N = 264, .K = 1024, .dtype = bf16, .tile = 48},
                 kPairs,
                 2,
                 3},
        TailCase{"int4_channelwise_pairs_t64",
                 {.scheme = scheme(4, kChannelwise), .N = 520, .K = 384, .dtype = bf16, .tile = 64},
                 {.tile_rows = 64,
                  .strips_per_cta = 8,
                  .warps_k = 1,
                  .share_activations = true,
                  .strip_run = 2},
                 3},
        // int8, 4 strips x 2 K slices at 32 rows (nothing shared): 3 iterations per warp, so at
        // most 3 parts, and the K slices' sums meet in shared memory after the exchange.
        TailCase{"int8_g32_asym_k_split_t32",
                 {.scheme = scheme(8, 32, true), .N = 136, .K = 384, .dtype = bf16, .tile = 32},
                 {.tile_rows = 32, .strips_per_cta = 4, .warps_k = 2},
                 3},
        // Part cuts inside groups (g128 = 2 chunks, 12 chunks in 4 parts of 3), and a last part
        // with nothing to multiply (6 iterations in 4 parts of 2: 2, 2, 2, 0).
        TailCase{"int4_g128_pairs_t48_cuts_in_groups",
                 {.scheme = scheme(4, 128, true), .N = 264, .K = 768, .dtype = bf16, .tile = 48},
                 kPairs,
                 4},
        TailCase{"int4_g64_pairs_t48_empty_last_part",
                 {.scheme = scheme(4, 64), .N = 264, .K = 384, .dtype = f16, .tile = 48},
                 kPairs,
                 4},
        // More CTAs than items: every item split (no whole round).
        TailCase{"int4_g128_pairs_t48_all_split",
                 {.scheme = scheme(4, 128), .N = 264, .K = 1024, .dtype = bf16, .tile = 48},
                 kPairs,
                 3,
                 0,
                 true},
        // 16-row tiles never split, whatever the plan and buffers (no slot written).
        TailCase{"int8_g32_asym_t16_never_splits",
                 {.scheme = scheme(8, 32, true), .N = 136, .K = 384, .dtype = bf16, .tile = 16},
                 {.tile_rows = 16, .strips_per_cta = 8, .warps_k = 1},
                 1},
        // One strip per warp at 64 rows, nothing shared (each warp finishes its own strip).
        TailCase{"int4_g64_asym_own_sums_t64_f16",
                 {.scheme = scheme(4, 64, true), .N = 200, .K = 640, .dtype = f16, .tile = 64},
                 {.tile_rows = 64, .strips_per_cta = 8, .warps_k = 1},
                 4},
        // GEMM1's fused gated epilogue on the last part, one strip per warp, shared at 32 rows.
        TailCase{
            "int4_g64_fused_shared_t32",
            {.scheme = scheme(4, 64), .N = 200, .K = 512, .dtype = bf16, .fused = true, .tile = 32},
            {.tile_rows = 32, .strips_per_cta = 8, .warps_k = 1, .share_activations = true},
            2}),
    [](const testing::TestParamInfo<TailCase>& p) { return std::string(p.param.name); });

}  // namespace
}  // namespace qmoe::cuda_mma
