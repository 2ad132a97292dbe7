#pragma once
// The per-ISA entry points of the tile kernel, and the choice between them.
// Included by the per-ISA files, so it declares nothing from the standard library.
#include "backend/cpu/panel_format.hpp"

namespace qmoe::cpu {

enum class Isa : uint8_t { portable, avx2, avx512 };

struct TileKernel {
  Isa isa;
  int max_tokens;  // tokens per call, 1..kMaxTileTokens (bounded by the register file)
  void (*run)(const PanelFormat& format, const PanelTile& tile);
};

// Defined in kernel_<isa>.cpp, each compiled for its instruction set. Call only when
// isa_supported() says the CPU has it.
TileKernel tile_kernel_portable();
TileKernel tile_kernel_avx2();
TileKernel tile_kernel_avx512();

}  // namespace qmoe::cpu
