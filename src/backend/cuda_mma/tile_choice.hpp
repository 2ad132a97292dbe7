#pragma once
// cuda-mma's tile height per batch, free of CUDA so that its cost model (descriptor.cpp, built in
// every configuration) predicts the tiles the kernel will run.
#include <cmath>
#include <cstdint>

namespace qmoe::cuda_mma {

// Tokens per tile the kernel is compiled for: the mma's N (8) times 1, 2, 4, 6 or 8.
inline constexpr int kTileRows[] = {8, 16, 32, 48, 64};

// Tokens per tile for M tokens routed top-k over E experts: 8 while that is rarely more than 90%
// full (small batches pay for no empty tile rows), 16 while an expert rarely overflows it (up to
// ~9.75 expected rows per expert), 32 up to 24, 48 from 24 to 36 (an expert then rarely needs a
// second tile), 32 otherwise up to 64, 64 beyond. Not monotonic in M (see workspace_align_sizes).
//
// Up to ~64 rows per expert the forward is weight bytes: int4 tiles of 8 to 48 rows run two or
// three CTAs per SM (resident_ctas_target; 48 rows only with shared activations,
// fitting_tile_rows). Each tile dequantizes its expert's codes again, and at decode the
// dequantization, not DRAM, is the limit (bench/NOTES.md run 11), so a tile that an expert's rows
// overflow is a second pass over its codes:
// - 16-row tiles pay only while mean plus two standard deviations of an expert's rows fit them:
//   a 32-row tile costs about what a 16-row one does, and at 16 expected rows 16-row tiles ran
//   1.5-1.7x slower than 32-row tiles at 24 (int4 asym on an H100: Mixtral M = 64 against 96,
//   625 against 364 us; bench/NOTES.md, "Crossover cost model").
// - At 32 expected rows (Mixtral M = 128), where 32-row tiles gave nearly half the experts a
//   second, mostly empty tile, 48-row tiles ran 16% faster (session 7 run 1). A 48-row tile
//   costs ~1.2-1.4x a 32-row one, so it pays only while an expert rarely needs two of them (up to
//   36 expected rows): at 64 (Qwen3 M = 1024) it ran 13% slower than 32-row tiles.
// - 64-row tiles run one CTA per SM and were 24-31% slower at 32 rows per expert (session 6
//   runs 1-2).
inline int choose_tile_rows(int64_t M, int top_k, int64_t E) {
  const double rows_per_expert = double(M) * top_k / double(E);
  if (rows_per_expert < 0.9 * 8) return 8;
  if (rows_per_expert + 2 * std::sqrt(rows_per_expert) <= 16) return 16;
  if (rows_per_expert <= 24) return 32;
  if (rows_per_expert <= 36) return 48;
  if (rows_per_expert <= 64) return 32;
  return 64;
}

}  // namespace qmoe::cuda_mma
