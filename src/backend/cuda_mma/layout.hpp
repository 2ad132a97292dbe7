#pragma once
// The cuda-mma weight layout, shared by the host repack (repack.cpp) and the kernel
// (expert_gemm_kernel.cuh). Plain data and constexpr index math only: no CUDA, no qmoe types.
//
// The GEMM is out[token, n] = sum_k W[n, k] x[token, k] on mma.m16n8k16 with the WEIGHTS as the
// A operand (16 output features n) and the TOKENS as B (8 tokens): at decode a tile holds 8
// (token, slot) rows, not 16, and the weights stream once.
//
// Units along K (all counted in logical k after the act-order sort, see below):
//   k16 step   one mma: 16 k.
//   span       32 k = 2 steps. Group sizes are multiples of 32, so a span lies in one group.
//   chunk      what one lane loads with ONE 16-byte load: 64 k of int4 (2 spans) or 32 k of int8.
// Along N: a strip is 16 weight rows (the mma's M), n0 = 16 * strip. Packed rows follow the
// weight's rows unless pack_weight is given a row order (w13 of gated activations: 8 gate rows
// then their 8 up rows per strip, so GEMM1's epilogue can apply the activation).
//
// Inside a span the k order is permuted so that lane (g = lane / 4, t = lane % 4) needs 8
// CONSECUTIVE activations for both of its steps (one 16-byte load per token):
//   step jj (0, 1) of the span, mma k index 2t + p     <-> k = span_k0 + 8t + 4jj + p      (p 0,1)
//                               mma k index 2t + 8 + p <-> k = span_k0 + 8t + 4jj + 2 + p
// The dot product does not care about the order of k as long as weights and activations agree,
// and the activations are read in natural order, so only the weights carry the permutation.
//
// A fragment of one step for lane (g, t), as 4 registers of two 16-bit values each:
//   R0 = W[n0+g  ][k_a], W[n0+g  ][k_a+1]      with k_a = span_k0 + 8t + 4jj
//   R1 = W[n0+g+8][k_a], W[n0+g+8][k_a+1]
//   R2 = W[n0+g  ][k_a+2], W[n0+g  ][k_a+3]
//   R3 = W[n0+g+8][k_a+2], W[n0+g+8][k_a+3]
// Codes of one step in 32-bit words:
//   int4: one word; nibble i (bits 4i..4i+3) = low element of R_i, nibble 4+i = its high element,
//         so (word >> 4i) & 0x000f000f puts R_i's two codes in the two 16-bit halves. Each nibble
//         holds code XOR 8, the two's-complement nibble of code - 8: cuda-wgmma's kernel
//         reads signed codes, and with them it reads these very bytes (the 32-bit words are also
//         its fragments, in its own k order), so one copy of the codes serves both backends
//         (cuda/int4_code_order.hpp). e2m1 codes are stored as they are.
//   int8: two words; word 0 = bytes [R0 lo, R0 hi, R1 lo, R1 hi], word 1 = the same for R2, R3.
// A chunk's 16 bytes for one lane are its steps' words in step order (int4: 4 steps, int8: 2).
//
// Arrays (E = experts, S = strips, C = chunks, G = groups):
//   codes        [E][S][C][32 lanes][16 bytes]  a warp's 512 contiguous bytes per (strip, chunk)
//   scale_pairs  [E][S][G][8] u32: low half = scale of row n0+g, high half = row n0+g+8, as
//                f16 or bf16 bits (whichever the checkpoint stored: lossless)
//   zero_pairs   [E][S][G][8] u16: low byte = zero of row n0+g, high byte = row n0+g+8
//                (both followed by two groups [8] of zeros: loads run a group ahead, past a
//                strip's last group into the next strip's first, or into these). Strip-major:
//                a strip's consecutive groups share 128-byte lines (4 groups of scales), so a
//                warp walking K finds the next groups' scales already in L2.
//   bias         [E][N] f32
// Act-order (g_idx): each expert's input channels are sorted by group and every group is padded
// to whole spans, giving the logical k order; then
//   k_source     [E][K_pad] i32: input channel read for logical k (-1 = padding, reads 0)
//   span_group   [E][K_pad / 32] i32: group of each span
// Without act-order logical k = input channel, span s is in group s / spans_per_group, and
// K_pad - K padding channels read 0.
#include <cstdint>

#include "cuda/int4_code_order.hpp"

#if defined(__CUDACC__)
#define QMOE_MMA_HOST_DEVICE __host__ __device__
#else
#define QMOE_MMA_HOST_DEVICE
#endif

namespace qmoe::cuda_mma {

inline constexpr int kStripRows = 16;
inline constexpr int kSpanK = 32;
inline constexpr int kLanes = 32;
inline constexpr int kChunkBytesPerLane = 16;

// What a weight code is. Its bit count fixes the layout (chunk_k, the words of a step, the
// kernel's rings); the element itself fixes how a code becomes a value (Dequant,
// mma_primitives.cuh).
enum class WeightElement {
  int4,  // unsigned 4-bit integers, value = (code - zero) * scale
  int8,  // unsigned 8-bit integers, the same
  e2m1,  // MXFP4: 4-bit floats in int4's bit layout, value = e2m1(code) * scale, no zero; the
         // scale of each 32 k (one span) is 2^(e8m0 - 127) as bf16 bits (exact for every e8m0)
};

QMOE_MMA_HOST_DEVICE constexpr int code_bits(WeightElement e) {
  switch (e) {
    case WeightElement::int4: return 4;
    case WeightElement::int8: return 8;
    case WeightElement::e2m1: return 4;
  }
  return 0;
}

// A chunk is 16 bytes per lane, so 512 bytes per strip of 16 rows.
QMOE_MMA_HOST_DEVICE constexpr int chunk_k(WeightElement e) {
  return kLanes * kChunkBytesPerLane * 8 / (kStripRows * code_bits(e));
}

// Where the scale pair (zero pair) of (expert e, strip, group, g) sits, and the step from one
// group of a strip to the next.
inline constexpr int kGroupPairStride = 8;
QMOE_MMA_HOST_DEVICE constexpr int64_t group_pair_index(int64_t e, int64_t strip, int64_t group,
                                                        int g, int64_t strips, int64_t groups) {
  return ((e * strips + strip) * groups + group) * kGroupPairStride + g;
}
QMOE_MMA_HOST_DEVICE constexpr int spans_per_chunk(WeightElement e) { return chunk_k(e) / kSpanK; }

// Device-side description of one packed weight (w13 or w2); pointers are device pointers.
struct PackedWeightView {
  const void* codes = nullptr;
  const uint32_t* scale_pairs = nullptr;
  const uint16_t* zero_pairs = nullptr;  // nullptr: symmetric, zero = 2^(code bits - 1)
  const float* bias = nullptr;           // nullptr: no bias
  const int32_t* k_source = nullptr;     // nullptr: no act-order
  const int32_t* span_group = nullptr;   // act-order only
  WeightElement element = WeightElement::int4;
  bool scales_bf16 = false;
  int64_t N = 0, K = 0;  // logical rows and input channels
  int64_t strips = 0, chunks = 0, K_pad = 0, groups = 1, spans_per_group = 1;
};

}  // namespace qmoe::cuda_mma
