#pragma once
// Canonical QuantizedWeight -> cuda-wgmma's layout (grouped_gemm.hpp), once per weight: the host
// part (testable without a GPU) and the upload that finishes it on the device.
//
// Act-order (g_idx) runs as a permutation of K per expert: the weight's columns are sorted by
// group (kernel column j = input channel channels[e][j], quant/act_order.hpp), so the kernel's
// groups are whole and in order again. GEMM1's input is gathered in that order (routing_glue.hpp);
// GEMM2's input is the activation's output, so w13's rows are permuted instead, and the
// activation already writes its channels in w2's order (w13_rows_for_w2).
#include <cuda_runtime_api.h>

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "backend/cuda_wgmma/grouped_gemm.hpp"
#include "qmoe/config.hpp"
#include "qmoe/quant.hpp"

namespace qmoe::cuda_wgmma {

struct HostKernelWeight {
  // signed codes: int4 in the shared order (code_order.hpp), int8 [E, N, K] K-major; MXFP4: e4m3
  // [E, N, K]
  std::vector<uint8_t> codes;
  std::vector<uint16_t> scales;   // [E, K/G, N] bits of the activation dtype
  std::vector<float> zero_terms;  // [E, K/G, N] (2^(bits-1) - zero) * scale16; empty if symmetric
  int group_size = 0;
};

// i32 [E, K]: the input channel behind each kernel column of each expert, for an act-order
// weight (groups ascending, each exactly group-size channels); empty without act-order. Throws
// qmoe::Error naming `what` for groups of other sizes.
std::vector<int32_t> kernel_channels(const QuantizedWeight& w, const std::string& what);

// Whether `w` is held as 4-bit integer codes, in the order cuda-mma shares (code_order.hpp).
bool int4_codes(const QuantizedWeight& w);

// i32 [E, w13 rows]: the w13 row behind each kernel row; empty when row n is row n. Two orders
// meet here. Where w2 has act-order, activation channel j is w2's kernel channel j (so GEMM2 reads
// its input in its own order). Where w13 has int4 codes and a gated activation, the rows come in
// cuda-mma's strips: gate rows 8s .. 8s + 7 and then their up rows, so that the codes are
// cuda-mma's (the activation reads that order, cuda/activation.hpp); otherwise gate and up rows
// follow the activation's own order ([gate; up] halves, or swigluoai's interleaved pairs).
std::vector<int32_t> w13_kernel_rows(const QuantizedExperts& experts, Activation activation);

// i32 [E, H]: the input channel behind each column of GEMM1's gathered rows, for an act-order
// w13 (kernel_channels, and for int4 codes each span's columns in the shared order); empty without
// act-order.
std::vector<int32_t> gather_channels(const QuantizedWeight& w13);

// Throws qmoe::Error (naming `what`) for what the kernel cannot hold (the descriptor rejects such
// layers first): W4A4, MXFP4 windows that cannot share a scale (mxfp4_recode.hpp), act-order
// groups of unequal size or K-split act-order shards, activation
// dtypes other than bf16/f16, int4 codes not in whole strips and chunks. rows: i32 [E, N], the
// canonical row behind each kernel row (empty: row n is row n); codes, scales and zero terms follow
// them. Act-order columns follow kernel_channels(w). with_codes = false leaves the codes out (the
// layer reads a partner's, SharedInt4Codes).
HostKernelWeight to_kernel_layout(const QuantizedWeight& w, DType act, const std::string& what,
                                  std::span<const int32_t> rows = {}, bool with_codes = true);

// f32 [E, N] bias in the kernel's row order (rows as above); empty without bias.
std::vector<float> kernel_bias(const QuantizedWeight& w, std::span<const int32_t> rows = {});

// Throws qmoe::Error (naming `what`) for a shape the kernel cannot tile (rows, K or groups) or a
// variant this build has no kernel for; to_kernel_layout also converts such shapes, which lets the
// layout be tested at small odd shapes.
void check_tileable(const QuantizedWeight& w, DType act, const std::string& what);

// Uploads `h` (to_kernel_layout of `w`) and builds the per-expert argument arrays, on the current
// device (synchronous). shared_codes: the device codes to read instead of h's (a partner's, in the
// same order), or nullptr.
KernelWeight upload_kernel_weight(const QuantizedWeight& w, const HostKernelWeight& h, DType act,
                                  const void* shared_codes = nullptr);

}  // namespace qmoe::cuda_wgmma
