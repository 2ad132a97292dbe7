#pragma once
// Which tile kernel runs: detected from the CPU at run time, or forced by QMOE_CPU_ISA.
#include <string_view>
#include <vector>

#include "backend/cpu/tile_kernel.hpp"

namespace qmoe::cpu {

std::string_view name(Isa isa);
bool isa_supported(Isa isa);
std::vector<Isa> supported_isas();  // best first
// The best ISA this CPU supports, or the one QMOE_CPU_ISA names (avx512bf16 | avx512 | avx2 |
// portable). Naming an unknown ISA, or one the CPU lacks, is an Error.
Isa selected_isa();
// The kernel for `isa`; an Error when the CPU lacks it.
TileKernel tile_kernel(Isa isa);

}  // namespace qmoe::cpu
