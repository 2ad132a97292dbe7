// GEMM1's fused alignment (expert_gemm.hpp's FusedAlignment: every CTA aligns a decode batch's
// pairs itself, one warp, and CTA 0 writes the alignment out for GEMM2 and the combine) against
// the alignment kernel (align_by_expert_cuda, held to a host reference in align_test.cpp). For
// batches of 1 to 32 pairs over one to many experts, with repeated experts and slots of experts on
// other ranks (kExpertNotHere), the fused launch must leave the kernel's sorted rows, tiles,
// padded total and pair rows (as far as GEMM2 and the combine read them) and the same output, bit
// for bit, as the launch that reads the kernel's alignment; under strip-run, K-split and the
// plan's own launch shapes.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "cuda/align.hpp"
#include "cuda/gpu_test.hpp"
#include "direct_gemm.hpp"
#include "qmoe/shard.hpp"

namespace qmoe::cuda_mma {
namespace {

constexpr int kTopK = 2;  // DirectGemm's pairs per token

struct Alignment {
  DeviceBuffer sorted, tiles, offsets, total, pair_rows;
  AlignOutputs out;
  explicit Alignment(const AlignSizes& sizes, int64_t pairs, int64_t E)
      : sorted(test::poisoned(size_t(sizes.max_padded_rows) * 4, 0x7f)),
        tiles(test::poisoned(size_t(sizes.max_tiles) * 4, 0x7f)),
        offsets(test::poisoned(size_t(E + 1) * 4, 0x7f)),
        total(test::poisoned(4, 0x7f)),
        pair_rows(test::poisoned(size_t(pairs) * 4, 0x7f)) {
    out.sorted_pair_ids = sorted.as<int32_t>();
    out.tile_experts = tiles.as<int32_t>();
    out.expert_offsets = offsets.as<int32_t>();
    out.padded_total = total.as<int32_t>();
    out.pair_rows = pair_rows.as<int32_t>();
  }
};

// pairs ids over E experts: random, some repeated, every fifth on another rank when `dropped`.
std::vector<int32_t> random_ids(int pairs, int64_t E, bool dropped, std::mt19937_64& rng) {
  std::vector<int32_t> ids(static_cast<size_t>(pairs));
  for (int i = 0; i < pairs; ++i)
    ids[size_t(i)] = dropped && i % 5 == 4 ? kExpertNotHere : int32_t(rng() % uint64_t(E));
  return ids;
}

struct Case {
  int64_t E;
  int pairs;
  bool dropped;
};

TEST(FusedAlignment, LeavesTheAlignmentKernelsRowsAndOutput) {
  QMOE_REQUIRE_GPU();
  std::mt19937_64 rng(20261206);
  const Case cases[] = {{1, 1, false},   {1, 32, false},  {3, 7, true},   {6, 2, false},
                        {6, 32, true},   {40, 8, false},  {40, 31, true}, {128, 16, false},
                        {128, 32, true}, {300, 24, false}};
  for (const Case& c : cases) {
    for (DType dtype : {DType::bf16, DType::f16}) {
      SCOPED_TRACE(::testing::Message()
                   << "E " << c.E << ", pairs " << c.pairs << (c.dropped ? " (some dropped)" : "")
                   << ", " << name(dtype));
      // Enough rows per expert that the GEMM's activations and output hold any alignment of
      // c.pairs pairs (<= pairs + 7 rows per expert present).
      const int rows = c.E < 3 ? 40 : 16;
      test::DirectGemm gemm({.scheme = test::scheme(4, 64),
                             .N = 128,
                             .K = 256,
                             .dtype = dtype,
                             .fused = true,
                             .tile = kRunTileRows,
                             .expert_rows = std::vector<int>(size_t(c.E), rows)});
      const std::vector<int32_t> ids = random_ids(c.pairs, c.E, c.dropped, rng);
      const DeviceBuffer ids_dev = test::to_device(ids);
      const AlignSizes sizes = align_sizes(c.pairs, c.E, kRunTileRows);
      DeviceBuffer scratch(sizes.workspace_bytes);

      Alignment kernel(sizes, c.pairs, c.E), fused(sizes, c.pairs, c.E);
      ASSERT_EQ(
          align_by_expert_cuda(ids_dev.as<int32_t>(), c.pairs, c.E, nullptr, c.E, kRunTileRows,
                               scratch.data(), scratch.bytes(), kernel.out, nullptr),
          cudaSuccess);
      gemm.problem.num_pairs = c.pairs;
      gemm.problem.max_tiles = sizes.max_tiles;
      const int64_t tokens = (c.pairs + kTopK - 1) / kTopK;
      const GemmPlan planned =
          plan_gemm(gemm.problem.w, kRunTileRows, tokens, kTopK, c.E, sizes.max_tiles, dtype);
      const GemmPlan plans[] = {
          planned,
          {.tile_rows = 8, .strips_per_cta = 8, .warps_k = 1, .strip_run = 2, .grid = 3},
          {.tile_rows = 8, .strips_per_cta = 2, .warps_k = 4, .grid = 2}};
      for (const GemmPlan& plan : plans) {
        gemm.problem.fused_align = {};
        gemm.problem.sorted_pair_ids = kernel.out.sorted_pair_ids;
        gemm.problem.tile_experts = kernel.out.tile_experts;
        gemm.problem.padded_total = kernel.out.padded_total;
        const Buffer want = gemm.run(plan);

        gemm.problem.fused_align = {ids_dev.as<int32_t>(), int(c.E), fused.out};
        gemm.problem.sorted_pair_ids = gemm.problem.tile_experts = gemm.problem.padded_total =
            nullptr;  // the fused launch reads none of them
        const Buffer got = gemm.run(plan);
        EXPECT_EQ(std::memcmp(got.data(), want.data(), size_t(want.nbytes())), 0)
            << "strips " << plan.strips_per_cta << " x " << plan.warps_k << " K slices, run "
            << plan.strip_run;
      }
      const int total = test::to_host<int32_t>(kernel.total, 1)[0];
      EXPECT_EQ(test::to_host<int32_t>(fused.total, 1)[0], total);
      EXPECT_EQ(test::to_host<int32_t>(fused.sorted, size_t(total)),
                test::to_host<int32_t>(kernel.sorted, size_t(total)));
      EXPECT_EQ(test::to_host<int32_t>(fused.tiles, size_t(total / kRunTileRows)),
                test::to_host<int32_t>(kernel.tiles, size_t(total / kRunTileRows)));
      EXPECT_EQ(test::to_host<int32_t>(fused.pair_rows, size_t(c.pairs)),
                test::to_host<int32_t>(kernel.pair_rows, size_t(c.pairs)));
    }
  }
}

}  // namespace
}  // namespace qmoe::cuda_mma
