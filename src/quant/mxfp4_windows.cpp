#include "quant/mxfp4_windows.hpp"

#include <algorithm>

#include "core/check.hpp"
#include "quant/mxfp4.hpp"

namespace qmoe {

bool mxfp4_block_holds_nonzero(const uint8_t* block_codes) {
  for (int b = 0; b < kMxBlock / 2; ++b)
    if ((block_codes[b] & 0x77) != 0) return true;
  return false;
}

int mxfp4_window_spread(const QuantizedWeight& w, int64_t window) {
  if (w.scheme.kind != WeightKind::mxfp4) return 0;
  check(window > 0 && window % kMxBlock == 0 && w.K % window == 0,
        "mxfp4 window of {} channels: must be a multiple of {} dividing K = {}", window, kMxBlock,
        w.K);
  const int64_t blocks_per_row = w.K / kMxBlock, blocks_per_window = window / kMxBlock;
  const uint8_t* codes = w.codes.data_as<uint8_t>();
  const uint8_t* scales = w.scales.data_as<uint8_t>();
  int spread = 0;
  for (int64_t row = 0; row < w.E * w.N; ++row) {
    const uint8_t* row_scales = scales + row * blocks_per_row;
    const uint8_t* row_codes = codes + row * (w.K / 2);
    for (int64_t first = 0; first < blocks_per_row; first += blocks_per_window) {
      int lo = 255, hi = -1;
      for (int64_t b = first; b < first + blocks_per_window; ++b) {
        // Most windows are even: look at the codes only when the scales differ.
        lo = std::min<int>(lo, row_scales[b]);
        hi = std::max<int>(hi, row_scales[b]);
      }
      if (hi - lo <= spread) continue;
      lo = 255;
      hi = -1;
      for (int64_t b = first; b < first + blocks_per_window; ++b) {
        if (!mxfp4_block_holds_nonzero(row_codes + b * kMxBlock / 2)) continue;
        lo = std::min<int>(lo, row_scales[b]);
        hi = std::max<int>(hi, row_scales[b]);
      }
      if (hi >= lo) spread = std::max(spread, hi - lo);
    }
  }
  return spread;
}

}  // namespace qmoe
