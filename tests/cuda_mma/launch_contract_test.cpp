// The expert GEMM's launch refuses plans its kernel cannot run (expert_gemm_kernel.cuh): they
// would give wrong sums or deadlock at a barrier, not an error. Refused before any CUDA call, so
// this runs without a GPU.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstdint>

#include "backend/cuda_mma/expert_gemm.hpp"

namespace qmoe::cuda_mma {
namespace {

cudaError_t launch(GemmPlan plan, DType dtype = DType::bf16) {
  GemmProblem problem;
  problem.w.element = WeightElement::int4;
  return launch_expert_gemm(problem, plan, dtype, nullptr);
}

TEST(CudaMmaLaunch, RefusesPlansTheKernelCannotRun) {
  // Tile heights other than kTileRows.
  EXPECT_EQ(launch({.tile_rows = 24, .strips_per_cta = 8, .warps_k = 1, .grid = 1}),
            cudaErrorInvalidValue);
  // Strips x K slices must be the CTA's 8 warps.
  EXPECT_EQ(launch({.tile_rows = 8, .strips_per_cta = 4, .warps_k = 1, .grid = 1}),
            cudaErrorInvalidValue);
  EXPECT_EQ(launch({.tile_rows = 8, .strips_per_cta = 8, .warps_k = 2, .grid = 1}),
            cudaErrorInvalidValue);
  // Shared activations only where the slice is the whole CTA (one K slice).
  EXPECT_EQ(launch({.tile_rows = 32,
                    .strips_per_cta = 4,
                    .warps_k = 2,
                    .share_activations = true,
                    .grid = 1}),
            cudaErrorInvalidValue);
  // Two strips per warp: at 8-row tiles (back to back) or at tiles that share their activations
  // (side by side), where a warp owns whole strips (one K slice).
  EXPECT_EQ(launch({.tile_rows = 8, .strips_per_cta = 8, .warps_k = 1, .strip_run = 3, .grid = 1}),
            cudaErrorInvalidValue);
  EXPECT_EQ(launch({.tile_rows = 16, .strips_per_cta = 8, .warps_k = 1, .strip_run = 2, .grid = 1}),
            cudaErrorInvalidValue);
  EXPECT_EQ(launch({.tile_rows = 8, .strips_per_cta = 4, .warps_k = 2, .strip_run = 2, .grid = 1}),
            cudaErrorInvalidValue);
  EXPECT_EQ(launch({.tile_rows = 48, .strips_per_cta = 8, .warps_k = 1, .strip_run = 2, .grid = 1}),
            cudaErrorInvalidValue);
  // Tail splits of 1 to kMaxTailParts parts.
  EXPECT_EQ(launch({.tile_rows = 8, .strips_per_cta = 8, .warps_k = 1, .tail_parts = 0, .grid = 1}),
            cudaErrorInvalidValue);
  EXPECT_EQ(launch({.tile_rows = 8,
                    .strips_per_cta = 8,
                    .warps_k = 1,
                    .tail_parts = kMaxTailParts + 1,
                    .grid = 1}),
            cudaErrorInvalidValue);
  // Activations in bf16 or f16 only.
  EXPECT_EQ(launch({.tile_rows = 8, .strips_per_cta = 8, .warps_k = 1, .grid = 1}, DType::f32),
            cudaErrorInvalidValue);
}

// A fused alignment lives in the shared memory of the kRunTileRows-row instances, sized for
// kFusedAlignPairs pairs; any other launch of one would read an alignment nobody wrote.
TEST(CudaMmaLaunch, RefusesAFusedAlignmentItsSharedMemoryCannotHold) {
  int32_t word = 0;  // never read: every launch below is refused first
  GemmProblem problem;
  problem.w.element = WeightElement::int4;
  problem.num_pairs = kFusedAlignPairs;
  problem.fused_align.topk_ids = &word;
  problem.fused_align.num_experts = 4;
  problem.fused_align.out.sorted_pair_ids = problem.fused_align.out.tile_experts =
      problem.fused_align.out.padded_total = &word;
  const GemmPlan decode{.tile_rows = kRunTileRows, .strips_per_cta = 8, .warps_k = 1, .grid = 1};
  EXPECT_EQ(
      launch_expert_gemm(problem, {.tile_rows = 16, .strips_per_cta = 8, .warps_k = 1, .grid = 1},
                         DType::bf16, nullptr),
      cudaErrorInvalidValue);
  GemmProblem more = problem;
  more.num_pairs = kFusedAlignPairs + 1;
  EXPECT_EQ(launch_expert_gemm(more, decode, DType::bf16, nullptr), cudaErrorInvalidValue);
  GemmProblem no_experts = problem;
  no_experts.fused_align.num_experts = 0;
  EXPECT_EQ(launch_expert_gemm(no_experts, decode, DType::bf16, nullptr), cudaErrorInvalidValue);
  GemmProblem nowhere = problem;
  nowhere.fused_align.out.padded_total = nullptr;
  EXPECT_EQ(launch_expert_gemm(nowhere, decode, DType::bf16, nullptr), cudaErrorInvalidValue);
}

// A plan's strip run holds only where the staged loop can run the problem: the plan sees the
// weights, the launch also the activation rows, which must be 16-byte aligned.
TEST(CudaMmaLaunch, StripRunsFallBackWhereTheStagedLoopCannotRun) {
  GemmProblem problem;
  problem.w.element = WeightElement::int4;
  problem.w.K = 1024, problem.w.chunks = 16, problem.w.strips = 32;
  problem.a = reinterpret_cast<const void*>(uintptr_t{4096});
  problem.a_stride = 1024;
  const GemmPlan plan{.tile_rows = 8, .strip_run = 2, .grid = 1};
  EXPECT_EQ(effective_strip_run(problem, plan), 2);
  EXPECT_EQ(effective_strip_run(problem, {.tile_rows = 8, .strip_run = 1, .grid = 1}), 1);
  GemmProblem shifted = problem;  // a view 8 bytes into a buffer
  shifted.a = reinterpret_cast<const void*>(uintptr_t{4104});
  EXPECT_EQ(effective_strip_run(shifted, plan), 1);
  GemmProblem strided = problem;
  strided.a_stride = 1028;
  EXPECT_EQ(effective_strip_run(strided, plan), 1);
  GemmProblem odd_chunks = problem;
  odd_chunks.w.K = 960, odd_chunks.w.chunks = 15;
  EXPECT_EQ(effective_strip_run(odd_chunks, plan), 1);
  GemmProblem act_order = problem;
  const int32_t source[1] = {0};
  act_order.w.k_source = source;
  EXPECT_EQ(effective_strip_run(act_order, plan), 1);

  // Side by side at a shared tile: int4 only (odd chunks are fine: each warp runs its strips'
  // whole K together), and never for act-order or unaligned rows.
  const GemmPlan pair{.tile_rows = 48, .share_activations = true, .strip_run = 2, .grid = 1};
  EXPECT_EQ(effective_strip_run(problem, pair), 2);
  EXPECT_EQ(effective_strip_run(odd_chunks, pair), 2);
  EXPECT_EQ(effective_strip_run(shifted, pair), 1);
  EXPECT_EQ(effective_strip_run(act_order, pair), 1);
  GemmProblem int8 = problem;
  int8.w.element = WeightElement::int8, int8.w.chunks = 32;
  EXPECT_EQ(effective_strip_run(int8, pair), 1);
}

}  // namespace
}  // namespace qmoe::cuda_mma
