#pragma once
// The per-ISA entry points of the tile kernel, and the choice between them.
// Included by the per-ISA files, so it declares nothing from the standard library.
#include "backend/cpu/panel_format.hpp"

namespace qmoe::cpu {

// avx512_bf16 is avx512 plus a bf16 dot-product kernel (twice the multiply-adds per instruction
// of f32 FMA, exact products: see PanelTileBf16) that bf16 layers use for both GEMMs.
enum class Isa : uint8_t { portable, avx2, avx512, avx512_bf16 };

struct TileKernel {
  Isa isa;
  int max_tokens;  // tokens per call, 1..kMaxTileTokens (bounded by the register file)
  void (*run)(const PanelFormat& format, const PanelTile& tile);
  // Optional: bf16 activations, formats with an even group size. Null when absent.
  int max_tokens_bf16 = 0;
  void (*run_bf16)(const PanelFormat& format, const PanelTileBf16& tile) = nullptr;
};

// Defined in kernel_<isa>.cpp, each compiled for its instruction set. Call only when
// isa_supported() says the CPU has it.
TileKernel tile_kernel_portable();
TileKernel tile_kernel_avx2();
TileKernel tile_kernel_avx512();
TileKernel tile_kernel_avx512_bf16();  // tile_kernel_avx512() with run_bf16 set

}  // namespace qmoe::cpu
