#pragma once
// The expert GEMM kernel (see expert_gemm.hpp for the contract, layout.hpp for the weights).
//
// Persistent CTAs of 8 warps walk the flat list of work items (tile of sorted rows, N tile).
// A work item is `strips_per_cta` x kRun strips of 16 weight rows; its 8 warps are
// strips_per_cta strips (or kRun strips each: streamed back to back at 8-row tiles, side by side
// at shared tiles) x warps_k K slices. Each
// warp streams its strip's codes for its K slice through its own cp.async ring in shared memory
// (k_loop_common.cuh), dequantizes in registers and runs mma.m16n8k16 with the 16 weight rows as A
// and 8 tokens per fragment as B. Layers without act-order take k_loop_staged.cuh, whose
// activations come through the ring too; act-order and unaligned rows take k_loop_general.cuh. Per
// group, products accumulate in a separate fp32 fragment that is scaled once (fp32) into the
// result, so the codes enter the mma as exact integers (except where a warp multiplies two strips
// side by side: the scales are then folded into the weights, staged_k_loop). The warps_k partial
// results meet in shared memory and are summed in a fixed order (deterministic); the epilogue
// applies router weight and bias and, for GEMM1, the activation (gate and up rows share a strip,
// repack.hpp's gated_row_order), then stores T.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <iterator>

#include "backend/cuda_mma/epilogue.cuh"
#include "backend/cuda_mma/expert_gemm.hpp"
#include "backend/cuda_mma/expert_gemm_ops.hpp"
#include "backend/cuda_mma/k_loop_general.cuh"
#include "backend/cuda_mma/k_loop_staged.cuh"
#include "backend/cuda_mma/tail_split.cuh"
#include "cuda/align_warp.cuh"
#include "cuda/dependent_launch.cuh"

namespace qmoe::cuda_mma {

inline constexpr int kThreads = kWarps * 32;
inline constexpr int kRedStride = 20;  // floats per token row of the reduction buffer: 16 + 4
                                       // keeps the 4 lanes of a quad on different banks

// Whether staged_dispatch has loops for tiles whose last fragments are empty (see there).
template <int BM, bool kShared, int kRun>
inline constexpr bool kFewerFragmentLoops = (kRun > 1 && kShared) && (BM >= 32 && BM <= 48);

// The staged loop for the flush period this layer's groups allow (see staged_k_loop). Where two
// strips go side by side at every flush period of a span (groups of 64 and more), a tile whose
// last one or two fragments hold no token row (live: the fragments up to its last row; an
// expert's last tile) takes a loop compiled for fewer fragments: at 48-row tiles for 32 +- 5
// rows per expert (Mixtral-8x7B at 128 tokens) a quarter of the mma and activation reads were
// on padding rows. Not at 64-row tiles: with the two loops compiled in next to it, the full loop
// there grew 2% (972 -> 991 instructions per 3 iterations, register allocation) and Mixtral-8x7B
// at 1024 tokens ran 2.6% slower (bench/NOTES.md, session 12 run 1).
template <class T, WeightElement kElem, int BM, bool kShared, int kRun>
__device__ __forceinline__ void staged_dispatch(const PackedWeightView& w, int e, int64_t strip,
                                                int c_begin, int c_end, int lane,
                                                const T* const (&rows)[BM / 8], uint32_t code_ring,
                                                uint32_t act_ring, int rank, int live,
                                                float (&acc)[kRun][BM / 8][4]) {
  constexpr int kSpans = WarpRing<kElem, BM>::kSpansPerIter;
  constexpr int kFrags = BM / 8;
  const int spans_per_group = int(w.spans_per_group);
  auto loop = [&]<int kFlushSpans, int kLiveFrags = kFrags>() {
    staged_k_loop<T, kElem, BM, kFlushSpans, kShared, kRun, kLiveFrags>(
        w, e, strip, c_begin, c_end, lane, rows, code_ring, act_ring, rank, acc);
  };
  if (spans_per_group % kSpans == 0) {
    if constexpr (kFewerFragmentLoops<BM, kShared, kRun>) {
      if (live <= kFrags - 2) return loop.template operator()<kSpans, kFrags - 2>();
      if (live == kFrags - 1) return loop.template operator()<kSpans, kFrags - 1>();
    }
    loop.template operator()<kSpans>();
  } else if (kSpans % 2 == 0 && spans_per_group % 2 == 0) {
    loop.template operator()<2>();
  } else {
    loop.template operator()<1>();
  }
}

// share_activations: the plan's flag; tiles of kMayShare rows then get one activation ring per
// CTA (CtaRings). Unshared, the K-split sums red_sh reuse the rings' memory; sharing warps sum
// their own strips (the kernel's own_sums) and never use red_sh.
// kRun 2 at such tiles: each warp multiplies two strips together (staged_k_loop), its code ring
// holds both.
template <int BM, int kRun>
inline constexpr int kCodeStrips = kRun > 1 && kMayShare<BM> ? 2 : 1;

template <WeightElement kElem, int BM, int kRun>
__host__ __device__ constexpr size_t ring_bytes(bool share_activations) {
  using Rings = CtaRings<kElem, BM, kCodeStrips<BM, kRun>>;
  if (kMayShare<BM> && share_activations) return Rings::bytes(true);
  const size_t red = size_t(kWarps) * BM * kRedStride * sizeof(float);
  return Rings::bytes(false) > red ? Rings::bytes(false) : red;
}

// A fused alignment (FusedAlignment) lies after the rings of the kRunTileRows-row instances: the
// sorted rows of at most kFusedAlignPairs pairs (each expert's run padded by at most
// kRunTileRows - 1 rows), each tile's expert, then the padded total. 1.2 KB: three CTAs per SM
// still fit (3 x 73 KB).
static_assert(kFusedAlignPairs <= cuda::kWarpAlignPairs, "one warp aligns the pairs");
inline constexpr int kFusedAlignRows = kFusedAlignPairs * kRunTileRows;
inline constexpr int kFusedAlignTiles = kFusedAlignPairs;
inline constexpr size_t kFusedAlignBytes =
    sizeof(int32_t) * (kFusedAlignRows + kFusedAlignTiles + 1);

template <WeightElement kElem, int BM, int kRun>
constexpr size_t expert_gemm_shared_bytes(bool share_activations) {
  return ring_bytes<kElem, BM, kRun>(share_activations) +
         (BM == kRunTileRows ? kFusedAlignBytes : 0);
}

// FusedAlignment, in every CTA: warp 0 aligns the pairs into align_sh (kFusedAlignBytes), and in
// CTA 0 also copies the alignment out for GEMM2 and the combine (rows and tiles up to the padded
// total: all they read). Returns the padded total to every thread.
__device__ __forceinline__ int align_in_prologue(const GemmProblem& p, int32_t* align_sh) {
  const FusedAlignment& f = p.fused_align;
  int32_t* rows_sh = align_sh;
  int32_t* tiles_sh = align_sh + kFusedAlignRows;
  int32_t* total_sh = tiles_sh + kFusedAlignTiles;
  if (threadIdx.x < 32) {
    const int lane = int(threadIdx.x);
    const bool first = blockIdx.x == 0;
    const int total = cuda::align_pairs_in_warp(
        f.topk_ids, int(p.num_pairs), f.num_experts, nullptr, f.num_experts, kRunTileRows,
        first ? f.out.fault : nullptr, rows_sh, tiles_sh, first ? f.out.pair_rows : nullptr);
    if (lane == 0) *total_sh = total;
    if (first) {
      __syncwarp();  // every lane's rows and tiles are written
      for (int r = lane; r < total; r += 32) f.out.sorted_pair_ids[r] = rows_sh[r];
      for (int t = lane; t < total / kRunTileRows; t += 32) f.out.tile_experts[t] = tiles_sh[t];
      if (lane == 0) *f.out.padded_total = total;
    }
  }
  __syncthreads();
  return *total_sh;
}

// CTAs per SM the registers are budgeted for (at most 65536 / (256 x CTAs) registers a thread):
// 3 at 8-row tiles, 2 at 16 and 32 rows, 1 at 64. int8 at 32 and 48 rows never shares (its
// activations are too few bytes per code byte, plan_gemm) and needs 120-168 KB of rings, so one
// CTA, and uses 172-232 registers. int4 at 48 rows runs where the plan shares (30 KB of rings,
// 42 KB with two strips per warp; fitting_tile_rows): two CTAs, its 6 fragments of accumulators
// (12 with two strips) in 128 registers.
template <WeightElement kElem, int BM>
constexpr int resident_ctas_target() {
  if constexpr (BM == 8)
    return 3;
  else if constexpr (BM == 16 || (BM <= 48 && code_bits(kElem) == 4))
    return 2;
  else
    return 1;
}

// kRun (GemmPlan::strip_run): strips per warp, 2 only with one K slice and a layer the staged
// loop takes: back to back at kRunTileRows rows (nothing shared), side by side at tiles that
// share (launch_instance checks; see staged_k_loop).
template <class T, WeightElement kElem, int BM, int kRun>
__global__ void __launch_bounds__(kThreads, resident_ctas_target<kElem, BM>())
    expert_gemm_kernel(const GemmProblem p, const int strips_per_cta, const int warps_k,
                       const bool share_activations, const int tail_parts) {
  constexpr int kFrags = BM / 8;
  // The rings (CtaRings); unshared, between K loops the same memory holds the K-split partial
  // sums red_sh [warp][BM][kRedStride] (no copy is pending once a K loop is done).
  // The rings must start 128-byte aligned: 80 bytes of static __shared__ memory ahead of them
  // made 8- and 16-row tiles 2x slower, and the same 80 bytes with this array declared
  // __align__(128) cost nothing (bench/NOTES.md, session 4 runs 5-6, session 5 run 1).
  extern __shared__ uint4 shared_sh[];
  float* red_sh = reinterpret_cast<float*>(shared_sh);
  using Rings = CtaRings<kElem, BM, kCodeStrips<BM, kRun>>;
  const bool shared_rings = kMayShare<BM> && share_activations;
  const uint32_t base_sh = shared_address(shared_sh);
  const uint32_t code_ring = base_sh + Rings::code_ring(threadIdx.x / 32, shared_rings);
  const uint32_t act_ring = base_sh + Rings::act_ring(threadIdx.x / 32, shared_rings);

  zero_activation_slots<kElem, BM>(act_ring, threadIdx.x % 32);
  __syncthreads();  // before the warps of a slice copy into the CTA's ring

  const PackedWeightView& w = p.w;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int strips_per_item = strips_per_cta * kRun;
  const int n_tiles = int((w.strips + strips_per_item - 1) / strips_per_item);
  // Whole iterations per warp, so that every warp's range starts at an iteration boundary.
  constexpr int kChunksPerIter = chunks_per_iteration<kElem, BM>();
  const int chunks_per_warp =
      int((w.chunks + warps_k * kChunksPerIter - 1) / (warps_k * kChunksPerIter)) * kChunksPerIter;
  // Everything global comes from the kernels before this one (alignment, GEMM1's output).
  cuda::wait_for_prior_grids();
  if (p.next_kernel_starts_early) cuda::release_dependent_grids();
  // The alignment: the problem's, or the fused one in shared memory. Read through a branch on
  // the (constant) parameter at each use rather than through a pointer picked once: two 64-bit
  // pointers live across the item loop made the 8-row instance (80 registers) spill more.
  const bool fused = BM == kRunTileRows && p.fused_align.topk_ids;
  int32_t* align_sh = reinterpret_cast<int32_t*>(reinterpret_cast<char*>(shared_sh) +
                                                 ring_bytes<kElem, BM, kRun>(false));
  const int padded_total = fused ? align_in_prologue(p, align_sh) : *p.padded_total;
  auto pair_of = [&](int r) { return fused ? align_sh[r] : p.sorted_pair_ids[r]; };
  const int tiles = padded_total / BM;
  const int items = tiles * n_tiles;
  const bool vector_ok =
      (w.K % 8 == 0) && (p.a_stride % 8 == 0) && (reinterpret_cast<uintptr_t>(p.a) % 16 == 0);
  const bool plain = vector_ok && !w.k_source;
  const int full_chunks = int(w.K / chunk_k(kElem));  // chunks whose activations all lie inside K
  const T* a_gl = static_cast<const T*>(p.a);
  const int tile_n = strips_per_cta * kStripRows;
  const int tile_n_log2 = __ffs(tile_n) - 1;  // strips_per_cta is a power of two

  // Not at 8-row tiles without runs: there the registers are capped at 80 (three CTAs per SM),
  // and with this epilogue compiled in next to the K-split one, the item loop spilled 4x more
  // and 8-row rows ran 5-7% slower even where the plan splits K and the epilogue never runs
  // (session 5 run 4). Instances with two strips per warp have no K split across warps and only
  // this epilogue.
  const bool own_sums = kRun > 1 || (BM >= 16 && warps_k == 1);
  // The last round's items split along K (tail_split.cuh), at tiles of kMinSharedTileRows rows
  // and more: at 8 and 16 rows (decode) the split made Qwen3-30B-A3B at 8 tokens 7% slower and
  // helped no row (bench/NOTES.md, session 9 run 5), and these instances' code stays as it was.
  constexpr bool kTailSplits = kMayShare<BM>;
  constexpr int64_t kSlotBytes = kPartialSlotBytes<kRun, kFrags>;
  const int64_t tail_slots =
      p.tail_flags ? min(p.tail_slots, p.tail_partial_bytes / kSlotBytes) : int64_t(0);
  const TailSplit split =
      kTailSplits ? tail_split(items, tail_parts, tail_slots, chunks_per_warp / kChunksPerIter)
                  : TailSplit{items, 1, items};
  for (int u = blockIdx.x; u < split.units; u += gridDim.x) {
    const WorkUnit unit = work_unit(split, u);
    const int item = unit.item;
    const int tile = item % tiles, n_tile = item / tiles;
    const int e = fused ? align_sh[kFusedAlignRows + tile] : p.tile_experts[tile];
    // A run's first strip when kRun > 1 (warps_k is 1 then).
    const int64_t strip = (int64_t(n_tile) * strips_per_cta + warp / warps_k) * kRun;
    const int kw = warp % warps_k;

    // This lane's token row per fragment (B column g).
    const T* rows[kFrags];
#pragma unroll
    for (int f = 0; f < kFrags; ++f) {
      const int r = tile * BM + 8 * f + g;
      const int32_t pair = pair_of(r);
      const int64_t src = p.a_rows_are_tokens ? pair / p.top_k : r;
      rows[f] = pair < p.num_pairs ? a_gl + src * p.a_stride : nullptr;
    }
    // Fragments up to the last one that holds a row (staged_dispatch); the same for every warp.
    int live = kFrags;
    if constexpr (kFewerFragmentLoops<BM, true, kRun>) {
      live = 0;
#pragma unroll
      for (int f = 0; f < kFrags; ++f)
        if (__any_sync(~0u, rows[f] != nullptr)) live = f + 1;
    }

    float acc_run[kRun][kFrags][4];
#pragma unroll
    for (int r = 0; r < kRun; ++r)
#pragma unroll
      for (int f = 0; f < kFrags; ++f)
        acc_run[r][f][0] = acc_run[r][f][1] = acc_run[r][f][2] = acc_run[r][f][3] = 0.f;
    float(&acc)[kFrags][4] = acc_run[0];  // without runs

    // Shared ring (its warps finish their own sums, own_sums): the first copies of this item
    // refill stages that a slower warp may still be reading for the last item.
    if (shared_rings && u != int(blockIdx.x)) __syncthreads();

    // At kRunTileRows rows a run covers its two strips' chunks (or the last strip's alone) as
    // one range.
    const bool second_strip = kRun == 2 && strip + 1 < w.strips;
    // Whole items (before the tail) run every chunk of the warp's range.
    const int2 range =
        part_range(kw * chunks_per_warp, min(int(w.chunks), (kw + 1) * chunks_per_warp), unit.part,
                   unit.tail_item >= 0 ? split.parts : 1, kChunksPerIter);
    const int c_begin = range.x;
    const int c_end = kRun == 2 && !kMayShare<BM> ? int(w.chunks) * (1 + second_strip) : range.y;
    // e, the K slice and the loop taken are the same for the warps of a slice; only a strip
    // past N can tell them apart. When the slice shares its activations such a warp still
    // takes its share of the copies and barriers (it reads the last strip's codes, and its sums
    // are never stored); otherwise it has nothing to do.
    if constexpr (kRun > 1 && kMayShare<BM>) {
      if (e >= 0)
        staged_dispatch<T, kElem, BM, true, kRun>(w, e, min(strip, w.strips - 1), c_begin, c_end,
                                                  lane, rows, code_ring, act_ring, warp, live,
                                                  acc_run);
    } else if constexpr (kRun > 1) {
      if (e >= 0 && strip < w.strips)
        staged_dispatch<T, kElem, BM, false, kRun>(w, e, strip, 0, c_end, lane, rows, code_ring,
                                                   act_ring, warp, live, acc_run);
    } else if (e >= 0 && c_begin < c_end) {
      const bool staged_rows = plain && c_end <= full_chunks;
      if (staged_rows) {
        // Sharing comes with warps_k 1 (plan_gemm): the slice is the CTA.
        if (shared_rings)
          staged_dispatch<T, kElem, BM, kMayShare<BM>, 1>(w, e, min(strip, w.strips - 1), c_begin,
                                                          c_end, lane, rows, code_ring, act_ring,
                                                          warp, live, acc_run);
        else if (strip < w.strips)
          staged_dispatch<T, kElem, BM, false, 1>(w, e, strip, c_begin, c_end, lane, rows,
                                                  code_ring, act_ring, warp, live, acc_run);
      } else if (strip < w.strips)
        general_k_loop<T, kElem, BM>(p, e, strip, c_begin, c_end, lane, rows, vector_ok, code_ring,
                                     acc);
    }

    if (kTailSplits && unit.tail_item >= 0 && split.parts > 1) {
      // Producer slots of this item: parts - 1 from first_slot; the last part finishes the item.
      const int64_t first_slot = int64_t(unit.tail_item) * (split.parts - 1);
      float4* first = partial_slot<kRun, kFrags>(p.tail_partials, first_slot, warp);
      constexpr int64_t kSlotStride = kSlotBytes / 16;
      if (unit.part < split.parts - 1) {
        publish_partial(acc_run, first + unit.part * kSlotStride, lane,
                        p.tail_flags + first_slot + unit.part);
        continue;
      }
      collect_partials(acc_run, first, kSlotStride, split.parts - 1, lane,
                       p.tail_flags + first_slot);
    }

    // C fragment: c0, c1 = (row g, tokens 2t, 2t+1), c2, c3 = (row g + 8, same tokens).
    T* out = static_cast<T*>(p.out);
    if (own_sums) {
      // One warp per strip: the warp finishes its strip from its registers and goes on to its
      // next item. Unless the CTA shares its activations (one barrier then starts the item), no
      // barrier ends the item, so the warps of a CTA drift apart and one warp's start-up
      // overlaps the others' streaming (the end-of-item barriers held 10% of the decode stall
      // samples, bench/NOTES.md session 4 run 3). Shared or not, the shared-memory round trip of
      // the K-split sums is skipped.
      if (e < 0 || strip >= w.strips) continue;
      // The run's strips (one without runs), strip j's sums in acc_run[j].
      store_own_sums<T>(p, pair_of, e, strip, kRun == 2 ? 1 + second_strip : 1, tile * BM, lane,
                        acc_run);
      continue;
    }
    __syncthreads();  // every warp's K loop is done: its ring may now hold red_sh
    float* mine = red_sh + warp * BM * kRedStride;
#pragma unroll
    for (int f = 0; f < kFrags; ++f) {
      const int tok = 8 * f + 2 * t;
      mine[tok * kRedStride + g] = acc[f][0];
      mine[(tok + 1) * kRedStride + g] = acc[f][1];
      mine[tok * kRedStride + g + 8] = acc[f][2];
      mine[(tok + 1) * kRedStride + g + 8] = acc[f][3];
    }
    __syncthreads();

    // Packed row n_local of this N tile for token row tok, finished: the warps_k partial sums
    // in a fixed order, then router weight and bias.
    auto finished = [&](int n_local, int tok, int32_t pair) {
      const int first_warp = (n_local / kStripRows) * warps_k, row = n_local % kStripRows;
      float v = 0.f;
      for (int kwi = 0; kwi < warps_k; ++kwi)
        v += red_sh[((first_warp + kwi) * BM + tok) * kRedStride + row];
      if (p.topk_weights) v *= p.topk_weights[pair];
      if (w.bias) v += w.bias[int64_t(e) * w.N + int64_t(n_tile) * tile_n + n_local];
      return v;
    };
    if (p.fuse_activation && gated_kind(p.activation)) {
      // Each strip: rows 0-7 are the gate rows and rows 8-15 the up rows of 8 outputs.
      const int outputs = tile_n / 2;
      for (int i = threadIdx.x; i < outputs * BM; i += kThreads) {
        const int o_local = i % outputs, tok = i / outputs;
        const int n_local = (o_local / 8) * kStripRows + o_local % 8;
        const int64_t o = int64_t(n_tile) * outputs + o_local;
        const int r = tile * BM + tok;
        const int32_t pair = pair_of(r);
        if (o >= p.act_cols || pair >= p.num_pairs || e < 0) continue;
        const float gate = finished(n_local, tok, pair), up = finished(n_local + 8, tok, pair);
        out[int64_t(r) * p.out_stride + o] =
            MmaType<T>::from_float(apply_gated(p.activation, gate, up, p.activation_params));
      }
    } else {
      for (int i = threadIdx.x; i < tile_n * BM; i += kThreads) {
        const int n_local = i & (tile_n - 1), tok = i >> tile_n_log2;
        const int64_t n = int64_t(n_tile) * tile_n + n_local;
        const int r = tile * BM + tok;
        const int32_t pair = pair_of(r);
        if (n >= w.N || pair >= p.num_pairs || e < 0) continue;
        float v = finished(n_local, tok, pair);
        if (p.fuse_activation) v = apply_single(p.activation, v);
        out[int64_t(r) * p.out_stride + n] = MmaType<T>::from_float(v);
      }
    }
    __syncthreads();  // red_sh is read; the next item's copies may overwrite it
  }
}

// Above 48 KB of dynamic shared memory a kernel must opt in, once per process and device: done
// when fitting_tile_rows or plan_gemm first asks how many CTAs fit (resident_ctas caches that
// per device), so the launch itself does not repeat a driver call per forward. Instances with
// two strips per warp side by side only run shared: their unshared rings (168 KB at 48 rows)
// would exceed an sm_80 SM's opt-in and turn them off there.
template <class T, WeightElement kElem, int BM, int kRun>
cudaError_t allow_shared_bytes() {
  return cudaFuncSetAttribute(
      expert_gemm_kernel<T, kElem, BM, kRun>, cudaFuncAttributeMaxDynamicSharedMemorySize,
      int(expert_gemm_shared_bytes<kElem, BM, kRun>(kCodeStrips<BM, kRun> > 1)));
}

// A run's range is whole iterations of the run tile's loop (staged_k_loop).
static_assert(chunks_per_iteration<WeightElement::int4, kRunTileRows>() == kRunChunkMultiple &&
              chunks_per_iteration<WeightElement::int8, kRunTileRows>() == kRunChunkMultiple &&
              chunks_per_iteration<WeightElement::e2m1, kRunTileRows>() == kRunChunkMultiple);

// Calls f.template operator()<BM, kRun>() for the compiled instance of (tile rows, strip run):
// tiles of kTileRows rows (choose_tile_rows), 2 strips per warp at kRunTileRows rows and, with
// 4-bit codes only, at 32 rows and more (elsewhere run is taken as 1).
template <WeightElement kElem, class F>
auto with_instance(int tile_rows, int run, F&& f) {
  auto side_by_side = [&]<int BM>() {
    if constexpr (code_bits(kElem) == 4) {
      if (run == 2) return f.template operator()<BM, 2>();
    }
    return f.template operator()<BM, 1>();
  };
  switch (tile_rows) {
    case kRunTileRows:
      return run == 2 ? f.template operator()<kRunTileRows, 2>()
                      : f.template operator()<kRunTileRows, 1>();
    case 16: return f.template operator()<16, 1>();
    case 32: return side_by_side.template operator()<32>();
    case 48: return side_by_side.template operator()<48>();
    default: return side_by_side.template operator()<64>();
  }
}

template <class T, WeightElement kElem>
cudaError_t launch_instance(const GemmProblem& p, const GemmPlan& plan, cudaStream_t stream) {
  if (std::find(std::begin(kTileRows), std::end(kTileRows), plan.tile_rows) == std::end(kTileRows))
    return cudaErrorInvalidValue;
  // The kernel's warps are strips x K slices, and a slice shares its activations only when it is
  // the whole CTA (one activation ring, one barrier); two strips per warp are one warp's whole K,
  // at the run tile or at a shared tile: any other plan would be wrong silently or deadlock, so
  // it is refused here.
  if (plan.strips_per_cta * plan.warps_k != kWarps || (plan.share_activations && plan.warps_k != 1))
    return cudaErrorInvalidValue;
  if (plan.tail_parts < 1 || plan.tail_parts > kMaxTailParts) return cudaErrorInvalidValue;
  // A fused alignment's shared memory holds kFusedAlignPairs pairs at kRunTileRows-row tiles;
  // other instances would read an alignment nobody wrote.
  const FusedAlignment& fused = p.fused_align;
  if (fused.topk_ids &&
      (plan.tile_rows != kRunTileRows || p.num_pairs > kFusedAlignPairs || fused.num_experts < 1 ||
       !fused.out.sorted_pair_ids || !fused.out.tile_experts || !fused.out.padded_total))
    return cudaErrorInvalidValue;
  const bool run_tile = plan.tile_rows == kRunTileRows;
  const bool pair_tile = plan.share_activations && plan.tile_rows >= kMinSharedTileRows;
  if (plan.strip_run != 1 && (plan.strip_run != 2 || plan.warps_k != 1 || !(run_tile || pair_tile)))
    return cudaErrorInvalidValue;
  return with_instance<kElem>(
      plan.tile_rows, effective_strip_run(p, plan), [&]<int BM, int kRun>() {
        return cuda::launch_dependent(
            expert_gemm_kernel<T, kElem, BM, kRun>, plan.grid, kThreads,
            expert_gemm_shared_bytes<kElem, BM, kRun>(plan.share_activations), stream, p,
            plan.strips_per_cta, plan.warps_k, plan.share_activations, plan.tail_parts);
      });
}

template <class T, WeightElement kElem>
int ctas_per_sm(int tile_rows, bool shared, int run) {
  return with_instance<kElem>(tile_rows, run, [&]<int BM, int kRun>() {
    int n = 0;
    if (allow_shared_bytes<T, kElem, BM, kRun>() != cudaSuccess ||
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(
            &n, expert_gemm_kernel<T, kElem, BM, kRun>, kThreads,
            expert_gemm_shared_bytes<kElem, BM, kRun>(shared)) != cudaSuccess) {
      cudaGetLastError();  // the instance cannot run here; a later launch must not see the error
      return 0;
    }
    return n;
  });
}

// The entry points of variant (T, kElem), exported by its instance file.
template <class T, WeightElement kElem>
inline constexpr GemmOps kGemmOps{launch_instance<T, kElem>, ctas_per_sm<T, kElem>};

}  // namespace qmoe::cuda_mma
