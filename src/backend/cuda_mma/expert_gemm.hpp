#pragma once
// The grouped expert GEMM of cuda-mma: for every tile of `tile_rows` sorted (token, slot) rows
// (all of one expert, from align_by_expert_cuda) and every output feature n,
//   out[row, n] = (router weight) * sum_k W[e, n, k] * a[row', k] (+ bias[e, n])
// in ONE launch over the flat list of (tile, N tile) work items. Weights in the layout of
// layout.hpp; fp32 accumulation; `out` in the activation dtype, row = sorted row.
#include <cuda_runtime_api.h>

#include <cstdint>

#include "backend/cuda_mma/layout.hpp"
#include "backend/cuda_mma/tile_choice.hpp"
#include "cuda/align.hpp"
#include "qmoe/config.hpp"
#include "qmoe/dtype.hpp"

namespace qmoe::cuda_mma {

// One compiled variant of the kernel: the weights' element x the activation dtype (bf16 or f16),
// each its own instantiation unit (expert_gemm_ops.hpp).
struct Variant {
  WeightElement element = WeightElement::int4;
  DType act = DType::bf16;
  friend bool operator==(const Variant&, const Variant&) = default;
};

// A decode batch's alignment made by GEMM1 itself: at most kFusedAlignPairs pairs at
// kRunTileRows-row tiles, every CTA aligns topk_ids in its prologue (one warp,
// cuda/align_warp.cuh) into its own shared memory, and CTA 0 also writes the alignment GEMM2 and
// the combine read (out: sorted_pair_ids, tile_experts, padded_total, pair_rows; fault). A launch
// of its own for it took 2.4-5 us of a 20-80 us decode forward, on its critical path.
inline constexpr int kFusedAlignPairs = 32;
struct FusedAlignment {
  const int32_t* topk_ids = nullptr;  // nullptr: an earlier kernel aligned the pairs
  int num_experts = 0;                // ids outside 0..num_experts-1 are dropped and reported
  AlignOutputs out;
};

struct GemmProblem {
  PackedWeightView w;
  // Activation row of sorted row r: a + row * a_stride (elements) with row = pair / top_k when
  // a_rows_are_tokens (GEMM1 reads hidden), else row = r (GEMM2 reads GEMM1's sorted output).
  const void* a = nullptr;
  int64_t a_stride = 0;
  bool a_rows_are_tokens = true;
  int top_k = 1;
  // From the alignment: pair of each sorted row (>= num_pairs = padding), expert of each tile,
  // and the padded row count (device scalar).
  const int32_t* sorted_pair_ids = nullptr;
  const int32_t* tile_experts = nullptr;
  const int32_t* padded_total = nullptr;
  FusedAlignment fused_align;  // instead of the three above (see there)
  int64_t num_pairs = 0;
  int64_t max_tiles = 0;  // upper bound of padded_total / tile_rows (align_sizes)
  // Optional: multiply each row's product by its router weight before the bias (the
  // apply-router-weight-on-input form, where GEMM1 carries the weight).
  const float* topk_weights = nullptr;
  void* out = nullptr;
  int64_t out_stride = 0;
  // Optional (GEMM1): apply the activation in the epilogue and write its act_cols outputs per
  // row instead of the raw N. Gated kinds need the weight packed in gated_row_order (repack.hpp).
  bool fuse_activation = false;
  Activation activation = Activation::silu;
  ActivationParams activation_params;
  int64_t act_cols = 0;
  // Optional (GemmPlan::tail_parts): where the last round's split items exchange their partial
  // sums, tail_partial_bytes of fp32 (16-byte aligned), and one flag per slot (tail_slots of
  // them), the flags zero before the first launch; every completed launch leaves them zero.
  // Launches that share them must not overlap (one stream): two at once could take each other's
  // flags and leave one waiting forever. Too small or absent, the items are not split.
  float* tail_partials = nullptr;
  int64_t tail_partial_bytes = 0;
  int32_t* tail_flags = nullptr;
  int64_t tail_slots = 0;
  // Whether the next kernel on the stream may be launched as soon as this one has started
  // (cuda/dependent_launch.cuh), its CTAs then taking each SM as this launch's CTAs leave it.
  // Off for GEMM1: the SMs that finish first would collect GEMM2's working CTAs, where a launch
  // on an empty GPU spreads them (Mixtral-8x7B at one token was 7% slower, bench/NOTES.md
  // session 10 run 2); GEMM2 then starts when GEMM1 has completed.
  bool next_kernel_starts_early = true;
};

// Buffers for GemmProblem::tail_* that hold every split the kernel makes at up to kMaxTailSlots
// slots; smaller ones limit the parts (a slot is 16-64 KB: 8 warps' sums).
inline constexpr int kMaxTailParts = 4;
inline constexpr int64_t kMaxTailSlots = 512;
inline constexpr int64_t kTailPartialBytes = 8 << 20;

// Tiles from this many rows up may share each K slice's activations among its warps
// (GemmPlan::share_activations); smaller tiles' activations are at most 4x their code bytes.
inline constexpr int kMinSharedTileRows = 32;

// Two strips per warp (GemmPlan::strip_run 2), where a warp owns whole strips (one K slice):
// - at tiles of kRunTileRows rows it streams them back to back as one K loop (a strip run); the
//   layer's chunks must then be a multiple of kRunChunkMultiple (the loop's chunks per iteration
//   there). At 16-row tiles runs did not pay (bench/NOTES.md, session 8 run 4).
// - at tiles that share their activations (int4) it multiplies them side by side, so each
//   activation fragment read from shared memory feeds both, with the group scales folded into
//   the weights (rounded to the activation dtype) to free the registers of per-group sums.
inline constexpr int kRunTileRows = 8;
inline constexpr int kRunChunkMultiple = 2;

// How one launch splits the work; chosen by plan_gemm from the problem and the device.
struct GemmPlan {
  int tile_rows = 8;               // tokens per tile, one of kTileRows
  int strips_per_cta = 8;          // 16-row weight strips of one work item
  int warps_k = 1;                 // warps splitting K inside a work item (8 / strips_per_cta)
  bool share_activations = false;  // the warps of a K slice copy its activations once, together
  // Strips of each warp (1, or 2 with one K slice at kRunTileRows rows or at a shared int4
  // tile; see above): a work item is then strips_per_cta x strip_run strips. Where the
  // activation rows turn out not to be 16-byte aligned, the launch runs 1.
  int strip_run = 1;
  // Parts (1 to kMaxTailParts) into which each item of the last, partial round of items is
  // split along K across CTAs, where the problem has the buffers (tail_split.cuh); tiles under
  // kMinSharedTileRows rows are never split.
  int tail_parts = 1;
  int grid = 0;  // persistent CTAs
};

// The tallest tile choose_tile_rows picks for any batch of 1 to M tokens.
int tallest_tile_rows(int64_t M, int top_k, int64_t E);

// Alignment sizes (align.hpp) that hold every batch of 1 to M tokens at the tile
// choose_tile_rows picks for it: the largest of M tokens' sizes over the tiles up to the tallest
// any such batch picks (only those: 64-row padding of every expert would reserve 335 MB per
// DeepSeek-V3 layer at 256 tokens, where 16-row tiles need 109 MB).
AlignSizes workspace_align_sizes(int64_t M, int top_k, int64_t E);

// Whether a GEMM's weights run the staged K loop (no act-order, K whole chunks): only that loop
// shares activations among a CTA's warps.
bool runs_staged(const PackedWeightView& w);

// Whether a GEMM's weights can run strips back to back (GemmPlan::strip_run): the staged loop,
// and whole iterations per strip.
bool runs_strips(const PackedWeightView& w);

// The tallest tile of at most tile_rows rows for a layer (both GEMMs take the tile) whose kernel
// instance runs on the current device with its activations unshared (64-row tiles then stage
// them in 204-216 KB of shared memory and int8 48-row tiles in 168 KB, which an sm_90 SM has
// and an sm_80 SM (164 KB) has not), and, at 48 rows, pays: int4 runs two CTAs per SM there
// only with its activations shared (30 KB of rings instead of 156 KB), so a layer with int4
// codes that one of its GEMMs cannot stage takes 32 rows.
int fitting_tile_rows(int tile_rows, const PackedWeightView& w13, const PackedWeightView& w2,
                      DType dtype);

// Resident CTAs on the current device for the kernel instance of (variant, tile rows,
// activations shared or not, strip run), asked once per device; 0 where it cannot run (or the
// build has no such variant). The first call also opts the instance into the shared memory it
// needs, which its launches require: plan_gemm calls it for every instance it may plan.
int resident_ctas(const Variant& variant, int tile_rows, bool shared, int run);

// Picks strips_per_cta / warps_k so that the expected work items fill the resident CTAs in
// whole waves (decode: split K across warps rather than leave SMs idle), whether the warps of
// a K slice share its activations, whether a warp takes two strips (strip_run: back to back at
// 8-row tiles where the items of such runs still fill the resident CTAs; side by side at shared
// int4 tiles where their rounds cost less), the tail split (shared tiles) and the grid.
GemmPlan plan_gemm(const PackedWeightView& w, int tile_rows, int64_t M, int top_k, int64_t E,
                   int64_t max_tiles, DType dtype);

// The strip run a launch of `plan` takes: plan.strip_run, or 1 where the staged loop cannot run
// the problem (its weights, or activation rows that are not 16-byte aligned: the plan saw only
// the weights).
int effective_strip_run(const GemmProblem& problem, const GemmPlan& plan);

// One launch of the variant (problem.w.element, dtype); dtype bf16 or f16. `plan` comes from
// plan_gemm on the current device, which also opted the kernel into its shared memory there.
cudaError_t launch_expert_gemm(const GemmProblem& problem, const GemmPlan& plan, DType dtype,
                               cudaStream_t stream);

}  // namespace qmoe::cuda_mma
