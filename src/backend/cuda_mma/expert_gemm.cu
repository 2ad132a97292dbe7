// Work split and dispatch of the expert GEMM (the kernel is expert_gemm_kernel.cuh, instantiated
// once per variant in the generated expert_gemm_<element>_<dtype>.cu files).
#include <algorithm>
#include <cmath>
#include <iterator>
#include <map>
#include <mutex>
#include <tuple>
#include <utility>

#include "backend/cuda_mma/expert_gemm.hpp"
#include "backend/cuda_mma/expert_gemm_ops.hpp"
#include "cuda/device.hpp"

namespace qmoe::cuda_mma {

int resident_ctas(const Variant& variant, int tile_rows, bool shared, int run) {
  const GemmOps* ops = gemm_ops(variant);
  if (!ops) return 0;
  static std::mutex mutex;
  static std::map<std::tuple<int, WeightElement, DType, int, bool, int>, int> cache;
  int device = 0;
  cudaGetDevice(&device);
  const std::lock_guard lock(mutex);
  const auto key = std::make_tuple(device, variant.element, variant.act, tile_rows, shared, run);
  if (auto it = cache.find(key); it != cache.end()) return it->second;
  const int n = ops->ctas_per_sm(tile_rows, shared, run) * current_cuda_device().sm_count;
  cache.emplace(key, n);
  return n;
}

bool runs_staged(const PackedWeightView& w) { return !w.k_source && w.K % chunk_k(w.element) == 0; }

bool runs_strips(const PackedWeightView& w) {
  return runs_staged(w) && w.chunks % kRunChunkMultiple == 0;
}

int fitting_tile_rows(int tile_rows, const PackedWeightView& w13, const PackedWeightView& w2,
                      DType dtype) {
  auto pays_at_48_rows = [](const PackedWeightView& w) {
    return code_bits(w.element) != 4 || runs_staged(w);
  };
  auto runs = [&](const PackedWeightView& w, int tile) {
    return resident_ctas({w.element, dtype}, tile, false, 1) > 0;
  };
  for (auto tile = std::rbegin(kTileRows); tile != std::rend(kTileRows); ++tile) {
    if (*tile > tile_rows) continue;
    if (*tile == 48 && !(pays_at_48_rows(w13) && pays_at_48_rows(w2))) continue;
    if (runs(w13, *tile) && runs(w2, *tile)) return *tile;
  }
  return kTileRows[0];
}

int tallest_tile_rows(int64_t M, int top_k, int64_t E) {
  int tallest = kTileRows[0];
  for (int64_t m = 1; m <= M; ++m) tallest = std::max(tallest, choose_tile_rows(m, top_k, E));
  return tallest;
}

AlignSizes workspace_align_sizes(int64_t M, int top_k, int64_t E) {
  const int tallest = tallest_tile_rows(M, top_k, E);
  // Sizes grow with the pairs (align.hpp), so M tokens' bound every smaller batch at one tile.
  AlignSizes bound;
  for (int tile : kTileRows) {
    if (tile > tallest) break;
    const AlignSizes s = align_sizes(M * top_k, E, tile);
    bound.max_padded_rows = std::max(bound.max_padded_rows, s.max_padded_rows);
    bound.max_tiles = std::max(bound.max_tiles, s.max_tiles);
    bound.workspace_bytes = std::max(bound.workspace_bytes, s.workspace_bytes);
  }
  return bound;
}

GemmPlan plan_gemm(const PackedWeightView& w, int tile_rows, int64_t M, int top_k, int64_t E,
                   int64_t max_tiles, DType dtype) {
  const Variant variant{w.element, dtype};
  // Shared activations take one ring per CTA instead of one per warp, so more CTAs may fit.
  const int resident_unshared = std::max(1, resident_ctas(variant, tile_rows, false, 1));
  // Expected tiles: experts hit by M tokens under uniform routing, each padded to whole tiles.
  const double pairs = double(M) * top_k;
  const double hit = double(E) * (1.0 - std::pow(1.0 - double(top_k) / double(E), double(M)));
  const double per_expert = pairs / std::max(hit, 1.0);
  const double tiles = std::min(double(max_tiles), hit * std::ceil(per_expert / tile_rows));

  // Time ~ waves x (start-up + chunks per warp x chunk-time). A work item starts with a
  // dependent chain (tile expert -> first codes) during which its warps have nothing in flight,
  // worth about kStartupChunks chunk-times; splitting K across more warps shortens each item but
  // adds items and start-ups. Measured (bench/NOTES.md): long K loops beat full last waves at
  // decode.
  constexpr double kStartupChunks = 12;
  // A chunk-time is the SM's issue time for a chunk, unless L2 is slower: besides the codes it
  // carries each warp's copy of the activations, act_ratio bytes per code byte. Session 3 run
  // 3: at act_ratio 8 (32-row tiles) Mixtral M=128 took ~3.1x its issue-bound time, so L2
  // catches up with issue near a ratio of kL2Ratio. Sharing (one copy per CTA, possible when the
  // CTA is one K slice) divides the ratio by the warps; it paid in every run at ratio 8, moved
  // between -17% and +5% at ratio 4 (runs 4-7), and at ratio 4 on an H100 (32-row tiles at 16
  // rows per expert) it took Mixtral from 570 to 324 us, Qwen3 from 274 to 193 and DeepSeek-V3
  // from 3945 to 2541 (bench/NOTES.md, "Crossover cost model"), hence kShareRatio. Only whole-CTA
  // slices share: with several K slices of unequal length compute-sanitizer racecheck reported
  // hazards that no reading of the code explains, and a probe of the suspected tool behaviour
  // (unequal named-barrier counts per warp) came out clean (bench/NOTES.md, session 4 run 1), so
  // the unexplained case stays off.
  constexpr double kL2Ratio = 2.5, kShareRatio = 2;
  constexpr double kCodeBytesPerChunk = kLanes * kChunkBytesPerLane;
  const double rows_per_tile = std::min(double(tile_rows), per_expert);
  const double act_ratio = rows_per_tile * chunk_k(w.element) * 2 / kCodeBytesPerChunk;
  // Only the staged loop shares, and it runs where the layer has no act-order and its K is whole
  // chunks; counting on sharing elsewhere charged every split but 8 strips x 1 slice the
  // unshared ratio and so picked 8 strips for nothing (session 4 review).
  const bool may_share =
      runs_staged(w) && tile_rows >= kMinSharedTileRows && act_ratio >= kShareRatio;
  const int resident_shared =
      may_share ? std::max(1, resident_ctas(variant, tile_rows, true, 1)) : resident_unshared;
  // A warp that owns whole strips may stream two in a row (GemmPlan::strip_run): one start-up
  // per two strips, half the items. Back to back only at the run tile (never shared; shared
  // tiles take two side by side, below), and only where a warp would have more than one strip
  // to go to.
  int resident_run = tile_rows == kRunTileRows && runs_strips(w) && w.strips > 8
                         ? resident_ctas(variant, tile_rows, false, 2)
                         : 0;
  const bool may_run = resident_run > 0;  // 0 also where the instance cannot run here
  GemmPlan plan;
  plan.tile_rows = tile_rows;
  double best = 0.0;
  constexpr std::pair<int, int> kSplits[] = {
      {8, 1}, {8, 2}, {4, 1}, {2, 1}, {1, 1}};  // strips, run
  for (auto [strips, run] : kSplits) {
    if (run > 1 && !may_run) continue;
    // Runs only where their items still fill every resident CTA: fewer CTAs streaming means
    // fewer bytes in flight, which the wave model does not see.
    if (run > 1 && tiles * std::ceil(double(w.strips) / (strips * run)) < resident_run) continue;
    const int warps_k = 8 / strips;
    if (strips < 8 && w.chunks < warps_k) break;  // at least one chunk per warp
    const bool shares = may_share && warps_k == 1;
    const double chunk_time = std::max(1.0, (shares ? act_ratio / strips : act_ratio) / kL2Ratio);
    const double items = tiles * std::ceil(double(w.strips) / (strips * run));
    const int resident = run > 1 ? resident_run : shares ? resident_shared : resident_unshared;
    const double cost = std::ceil(items / resident) *
                        (kStartupChunks + run * std::ceil(double(w.chunks) / warps_k) * chunk_time);
    if (best == 0.0 || cost < best) best = cost, plan.strips_per_cta = strips, plan.strip_run = run;
  }
  plan.warps_k = 8 / plan.strips_per_cta;
  plan.share_activations = may_share && plan.warps_k == 1;
  // Strip pairs at shared int4 tiles (each warp multiplies two strips together): an item of
  // them costs about kPairItemCost items of single strips (133 against 173 sm_90a instructions
  // per strip and chunk at 48 rows, bench/NOTES.md session 9), so they are taken where the rounds
  // of items they make, the last one split along K (tail_split.cuh), cost less.
  constexpr double kPairItemCost = 1.6;
  auto rounds = [](double items, int resident) {
    const double whole = std::floor(items / resident), tail = items - whole * resident;
    if (tail <= 0) return whole;
    return whole + 1.0 / std::clamp(std::floor(resident / tail), 1.0, double(kMaxTailParts));
  };
  // Folding rounds each scale to the activation dtype: f16 scales into bf16 lose 3 bits of a
  // group's scale (as the weights' own rounding does), but bf16 scales into f16 may leave f16's
  // range (above 65504, or below 2^-14 where precision drops), so those layers keep fp32 scaling.
  const bool scales_fold = !(w.scales_bf16 && dtype == DType::f16);
  const int resident_pair = plan.share_activations && code_bits(w.element) == 4 && scales_fold
                                ? resident_ctas(variant, tile_rows, true, 2)
                                : 0;
  if (resident_pair > 0 &&
      kPairItemCost * rounds(tiles * std::ceil(double(w.strips) / 16), resident_pair) <
          rounds(tiles * std::ceil(double(w.strips) / 8), resident_shared)) {
    plan.strip_run = 2;
    resident_run = resident_pair;
  }
  const int64_t n_tiles = (w.strips + plan.strips_per_cta * plan.strip_run - 1) /
                          (plan.strips_per_cta * plan.strip_run);
  const int resident = plan.strip_run > 1       ? resident_run
                       : plan.share_activations ? resident_shared
                                                : resident_unshared;
  // The last round split along K where the tiles share their activations (the only rows where
  // the split was measured to pay: Mixtral M = 128 -8%, bench/NOTES.md session 9 run 5).
  plan.tail_parts = plan.share_activations ? kMaxTailParts : 1;
  // CTAs for the split's units, not only for the items: a round of fewer items than resident
  // CTAs is split only where the grid holds two CTAs per item (tail_split.cuh). Capped at the
  // items, Mixtral-8x7B's GEMM2 at 128 tokens ran its 128 pair items unsplit on 128 of 264
  // CTAs, one per SM (bench/NOTES.md, session 11 run 2).
  const int64_t units = max_tiles * n_tiles * plan.tail_parts;
  plan.grid = int(std::max<int64_t>(1, std::min<int64_t>(units, resident)));
  return plan;
}

int effective_strip_run(const GemmProblem& p, const GemmPlan& plan) {
  const bool rows_aligned =
      p.w.K % 8 == 0 && p.a_stride % 8 == 0 && reinterpret_cast<uintptr_t>(p.a) % 16 == 0;
  if (plan.strip_run != 2 || !rows_aligned) return 1;
  if (plan.tile_rows == kRunTileRows) return runs_strips(p.w) ? 2 : 1;
  return plan.share_activations && code_bits(p.w.element) == 4 && runs_staged(p.w) ? 2 : 1;
}

cudaError_t launch_expert_gemm(const GemmProblem& problem, const GemmPlan& plan, DType dtype,
                               cudaStream_t stream) {
  const GemmOps* ops = gemm_ops({problem.w.element, dtype});
  return ops ? ops->launch(problem, plan, stream) : cudaErrorInvalidValue;
}

}  // namespace qmoe::cuda_mma
