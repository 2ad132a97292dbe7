#pragma once
// cuda-wgmma's token tiles, free of CUDA so that its cost model (descriptor.cpp, built in every
// configuration) counts the tiles the kernel will run.
#include <cstdint>

namespace qmoe::cuda_wgmma {

// The token tiles (CUTLASS's N), one launch each per GEMM. Each expert's rows run as whole
// 256-token tiles; the remainder r runs as one tile of the smallest size that holds it (r <= 64:
// 64, r <= 128: 128), or as one more partial 256-token tile when it is larger. Real routing spreads
// the rows per expert, so with 256-token tiles alone the last tile of about every other expert
// would be nearly empty; two small tiles cost more than one larger one (bench/NOTES.md).
inline constexpr int kLaunches = 3;
inline constexpr int kTileTokens[kLaunches] = {256, 128, 64};

// The launch whose tile takes a remainder of `rest` rows (0 < rest < 256): the smallest tile that
// holds it. constexpr, so that fill_group_args (routing_glue.cu, compiled with
// --expt-relaxed-constexpr) splits the rows on the device by the same rule the cost model counts.
constexpr int remainder_launch(int64_t rest) {
  // A local copy: device code may not index the host array at run time (the kernel would trap).
  static_assert(kLaunches == 3, "tiles lists every tile of kTileTokens");
  constexpr int tiles[kLaunches] = {kTileTokens[0], kTileTokens[1], kTileTokens[2]};
  for (int i = kLaunches - 1; i > 0; --i)
    if (rest <= tiles[i]) return i;
  return 0;
}

// The tiles an expert of `rows` rows runs, as counts per kTileTokens entry.
struct ExpertTiles {
  int64_t count[kLaunches] = {};
};
inline ExpertTiles expert_tiles(int64_t rows) {
  ExpertTiles t;
  t.count[0] = rows / kTileTokens[0];
  if (const int64_t rest = rows % kTileTokens[0]; rest > 0) ++t.count[remainder_launch(rest)];
  return t;
}

}  // namespace qmoe::cuda_wgmma
