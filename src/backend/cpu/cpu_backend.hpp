#pragma once
#include "backend/backend.hpp"

namespace qmoe {

// `cpu`: the fast x86-64 backend. Weights are repacked once into 16-row panels with scales and
// zero points inline (panel_format.hpp); forwards dequantize inside the GEMM inner loop with the
// best SIMD kernel the CPU has (AVX-512, AVX2+FMA, portable; QMOE_CPU_ISA forces one) on a
// thread pool created once (QMOE_CPU_THREADS sets its size).
const Backend& cpu_backend();

}  // namespace qmoe
