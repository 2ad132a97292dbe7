#include "backend/cpu/isa.hpp"

#include <cstdlib>
#include <string>

#include "core/check.hpp"

namespace qmoe::cpu {

std::string_view name(Isa isa) {
  switch (isa) {
    case Isa::portable: return "portable";
    case Isa::avx2: return "avx2";
    case Isa::avx512: return "avx512";
    case Isa::avx512_bf16: return "avx512bf16";
  }
  return "?";
}

bool isa_supported(Isa isa) {
  switch (isa) {
    case Isa::portable: return true;
    case Isa::avx2: return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    case Isa::avx512:
      return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw");
    case Isa::avx512_bf16:
      return isa_supported(Isa::avx512) && __builtin_cpu_supports("avx512bf16");
  }
  return false;
}

std::vector<Isa> supported_isas() {
  std::vector<Isa> isas;
  for (Isa isa : {Isa::avx512_bf16, Isa::avx512, Isa::avx2, Isa::portable})
    if (isa_supported(isa)) isas.push_back(isa);
  return isas;
}

Isa selected_isa() {
  const char* forced = std::getenv("QMOE_CPU_ISA");
  if (!forced || !*forced) return supported_isas().front();
  for (Isa isa : {Isa::avx512_bf16, Isa::avx512, Isa::avx2, Isa::portable}) {
    if (name(isa) != forced) continue;
    if (isa_supported(isa)) return isa;
    std::string have;
    for (Isa s : supported_isas()) have += fmt::format(" {}", name(s));
    fail("QMOE_CPU_ISA={} but this CPU lacks it (supported:{})", forced, have);
  }
  fail("QMOE_CPU_ISA={} is not an ISA (valid: avx512bf16, avx512, avx2, portable)", forced);
}

TileKernel tile_kernel(Isa isa) {
  check(isa_supported(isa), "the cpu backend's {} kernel needs a CPU with {}", name(isa),
        name(isa));
  switch (isa) {
    case Isa::avx512_bf16: return tile_kernel_avx512_bf16();
    case Isa::avx512: return tile_kernel_avx512();
    case Isa::avx2: return tile_kernel_avx2();
    case Isa::portable: break;
  }
  return tile_kernel_portable();
}

}  // namespace qmoe::cpu
