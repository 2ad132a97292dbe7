#pragma once
// The AVX2 tile kernel's MXFP4 body for one or two tokens (kernel_avx2_e2m1.cpp). Call only where
// the CPU has AVX2 and FMA, as tile_kernel_avx2() does.
#include "backend/cpu/panel_format.hpp"

namespace qmoe::cpu {

// Tokens the kernel takes per call: 4 sums per token (two k streams of 16 rows), and for one token
// 8, besides tables, masks, weights and activations, fill the 16 ymm registers.
inline constexpr int kE2m1Avx2MaxTokens = 2;

// PanelTile of an e2m1 panel (f.e2m1) of 1..kE2m1Avx2MaxTokens tokens.
void e2m1_tile_avx2(const PanelFormat& f, const PanelTile& tile);

}  // namespace qmoe::cpu
