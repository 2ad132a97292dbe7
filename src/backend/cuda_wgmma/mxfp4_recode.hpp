#pragma once
// MXFP4 weights in cuda-wgmma's layout. CUTLASS 4.2's Hopper mixed-input mainloop has no e2m1
// element and reads one scale per 64-channel K tile, while MXFP4 scales every 32 channels. So each
// 64-channel window of a row is re-coded at one power-of-two scale as fp8 e4m3 codes, which the
// mainloop converts to bf16/f16 in registers like int8:
//
//   value = e2m1(c) * 2^(E_b - 127)                    (block b of the window, exponent E_b)
//         = [e2m1(c) * 2^(s - (E_max - E_b))] * 2^(E_max - 127 - s)
//           \_______ e4m3 code ____________/    \___ window scale ___/
//
// E_max is the largest exponent of the window's nonzero blocks, s = 6 puts its largest magnitude
// (6) at 384 <= 448, e4m3's largest. e2m1's nonzero magnitudes are 2^-1, 2^0..2^2 and 1.5 * 2^0..
// 2^2; e4m3 holds 2^x down to x = -9 and 1.5 * 2^x down to x = -8 (its subnormals are k * 2^-9),
// so a block d = E_max - E_b below the window's largest is exact while -1 + s - d >= -9 and
// s - d >= -8: d <= 14 (kMxfp4WindowSpreadLimit). The
// window scale is a power of two: exact in bf16 always, and in f16 when it is at least 2^-24 (the
// smallest subnormal); for smaller windows s shrinks to keep it so (exactness then needs
// d <= s + 8), and the error names the window when that fails.
#include <cstdint>
#include <span>
#include <string>

#include "backend/cuda_wgmma/kernel_weight.hpp"
#include "backend/cuda_wgmma/mxfp4_window_limit.hpp"

namespace qmoe::cuda_wgmma {

// The e4m3 byte of v when e4m3 holds v exactly (finite, |v| <= 448, on its grid); -1 otherwise.
int e4m3_exactly(double v);

// Fills h's codes (e4m3 [E, N, K], K-major), scales ([E, K/64, N] in the activation dtype) and
// group size (64) from MXFP4 weight `w`, rows as to_kernel_layout's. Throws qmoe::Error naming
// `what`, the expert, row and window when a window cannot be re-coded exactly.
void recode_mxfp4(const QuantizedWeight& w, DType act, const std::string& what,
                  std::span<const int32_t> rows, HostKernelWeight& h);

}  // namespace qmoe::cuda_wgmma
