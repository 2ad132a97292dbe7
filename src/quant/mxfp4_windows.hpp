#pragma once
// How far apart the e8m0 scales of neighbouring MXFP4 blocks are. A kernel that re-codes a window
// of several 32-blocks at one shared scale (cuda-wgmma reads one scale per 64-channel K tile)
// shifts each block's codes by the difference of its exponent from the window's largest; how far
// it can shift exactly is the kernel's limit, and this is what the weights ask of it.
#include <cstdint>

#include "qmoe/quant.hpp"

namespace qmoe {

// Whether the 32-block of e2m1 codes at `block_codes` (16 bytes, two codes each) holds a nonzero
// code: bit 3 of a nibble is the sign, so -0 is a zero.
bool mxfp4_block_holds_nonzero(const uint8_t* block_codes);

// The largest difference between the e8m0 exponents of two blocks of one aligned window of
// `window` channels (same expert and row) that both hold a nonzero code, over the whole weight;
// 0 when no window has two such blocks. A block of zeros is left out: its scale does not change
// any value. `window` is a multiple of 32 dividing K; an integer weight gives 0.
int mxfp4_window_spread(const QuantizedWeight& w, int64_t window);

}  // namespace qmoe
