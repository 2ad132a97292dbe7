#pragma once
// Canonical QuantizedWeight -> cuda-wgmma's layout (grouped_gemm.hpp), once per weight: the host
// part (testable without a GPU) and the upload that finishes it on the device.
#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>
#include <vector>

#include "backend/cuda_wgmma/grouped_gemm.hpp"
#include "qmoe/quant.hpp"

namespace qmoe::cuda_wgmma {

struct HostKernelWeight {
  std::vector<uint8_t> codes;     // [E, N, K*bits/8] signed codes, K-major (not yet shuffled)
  std::vector<uint16_t> scales;   // [E, K/G, N] bits of the activation dtype
  std::vector<float> zero_terms;  // [E, K/G, N] (2^(bits-1) - zero) * scale16; empty if symmetric
  int group_size = 0;
};

// Throws qmoe::Error (naming `what`) for what the kernel cannot hold (the descriptor rejects such
// layers first): MXFP4, act-order, activation dtypes other than bf16/f16.
HostKernelWeight to_kernel_layout(const QuantizedWeight& w, DType act, const std::string& what);

// Uploads, shuffles the 4-bit codes and builds the per-expert argument arrays, on the current
// device (synchronous).
KernelWeight make_kernel_weight(const QuantizedWeight& w, DType act, const std::string& what);

}  // namespace qmoe::cuda_wgmma
