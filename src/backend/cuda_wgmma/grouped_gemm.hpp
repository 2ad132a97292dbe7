#pragma once
// cuda-wgmma's GEMM: CUTLASS's sm_90a mixed-input grouped GEMM (integer weights converted to
// bf16/f16 in registers, wgmma with fp32 accumulators, TMA loads, warp-specialised persistent
// cooperative schedule), one group per expert. Everything CUTLASS-typed stays inside the
// instance files (grouped_gemm_instance.cu.in); this header speaks in bytes and pointers.
//
// Operands, per expert e (so that the narrow operand is the one converted in registers, the
// weights are CUTLASS's A and the tokens its B):
//   codes   [N, K] K-major, signed (code - 2^(bits-1)); 4-bit codes in cuda-mma's order
//   (code_order.hpp);
//           MXFP4 re-coded as fp8 e4m3, one scale per 64-channel window (mxfp4_recode.hpp)
//   scales  [K/G, N] in the activation dtype (N contiguous): weight = scale * code
//   Zero points are not the kernel's: CUTLASS 4.2's grouped (pointer-array) mainloop with zeros
//   stopped at an illegal instruction on the H200. With weight = scale * (code - zero) =
//   scale * signed_code + scale * (2^(bits-1) - zero), the second term is added afterwards as
//   out += sum over groups of (the group's sum of the input row) * zero_term (routing_glue.hpp).
//   act     [m_e, K] rows of the expert's tokens (row-major)
//   out     [m_e, N] row-major, in the activation dtype
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "backend/cuda_wgmma/token_tiles.hpp"
#include "cuda/device_buffer.hpp"
#include "qmoe/dtype.hpp"

namespace qmoe::cuda_wgmma {

// The element the kernel reads its weights as.
enum class Code : uint8_t { int4, int8, e4m3 };

// One weight layout: code x activation dtype (compiled once per token tile).
struct Variant {
  Code code = Code::int4;
  DType act = DType::bf16;
};

// A stacked weight [E, N, K] in the kernel's layout, and the per-expert argument arrays that never
// change (pointers into it, its layouts and strides), all on the device.
struct KernelWeight {
  Variant variant;
  int64_t E = 0, N = 0, K = 0;
  int group_size = 0;               // K for channelwise
  DeviceBuffer codes, scales;       // codes: empty where the layer reads a partner's int4 codes
  const void* code_data = nullptr;  // the codes the kernel reads: `codes`, or the partner's
  DeviceBuffer zero_terms;   // f32 [E, K/G, N] scale * (2^(bits-1) - zero); empty if symmetric
  DeviceBuffer static_args;  // the arrays below, each [E]
  const void* code_ptrs = nullptr;
  const void* scale_ptrs = nullptr;
  const void* code_layouts = nullptr;
  const void* scale_strides = nullptr;
  const void* act_strides = nullptr;
  const void* out_strides = nullptr;

  size_t weight_bytes() const { return codes.bytes() + scales.bytes() + zero_terms.bytes(); }
};

// The per-call part of one launch, filled on the device from the routing (fill_group_args): [E]
// problem shapes (N, rows, K as three int32), [E] pointers to each expert's first activation row
// and output row of the launch.
struct GroupCall {
  const void* problem_shapes = nullptr;
  const void* const* act_rows = nullptr;
  void* const* out_rows = nullptr;
  void* workspace = nullptr;  // at least GemmOps::workspace_bytes of this variant and tile
  size_t workspace_bytes = 0;
  int sm_count = 0;
};

// What each variant's instance file provides.
struct GemmOps {
  // Builds `w.static_args` (and the pointers into it) for w.code_data and w.scales, already
  // filled.
  void (*make_static_args)(KernelWeight& w);
  size_t (*workspace_bytes)(int groups, int sm_count);
  cudaError_t (*run)(const KernelWeight& w, const GroupCall& call, cudaStream_t stream);
};

inline constexpr int kTileK = 64;

// nullptr when this build has no such variant. tile_tokens: one of kTileTokens. All tiles of a
// variant take the same KernelWeight.
const GemmOps* gemm_ops(const Variant& v, int tile_tokens);

}  // namespace qmoe::cuda_wgmma
