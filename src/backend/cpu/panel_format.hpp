#pragma once
// The packed weight layout the `cpu` kernels read, and the tile they compute. Plain pointers and
// sizes only: the per-ISA kernel files include this header and nothing of qmoe's types.
//
// A matrix [N, K] is cut into panels of 32 rows (kTileRows), each two halves of 16 rows
// (kHalfRows: one SIMD vector of f32). One panel is ONE byte stream over all of K, group after
// group, so scales and zero points arrive just before the codes they scale, and a kernel call
// reads exactly one sequential stream (what hardware and software prefetch follow best):
//
//   group g:  scales  f32[32]                 (row i of the panel at [i]; e2m1: u8[32], the e8m0
//                                             bytes, 2^(e - 127) each)
//             zeros   u8[32]                  (only with explicit zero points)
//             codes   steps of 32 bytes, 16 for rows 0..15 then 16 for rows 16..31:
//                     int4, e2m1: G/2 steps, step j = k-pair (2j, 2j+1) of the group;
//                           byte i = code(row i, 2j) | code(row i, 2j+1) << 4
//                     int8: G steps, byte i = code(row i, k)
//
// 16 bytes = one vector of 16 rows after zero extension to 32 bits (one zmm, two ymm). Kernels
// multiply the raw codes q (exact in f32 and in bf16) with the activations and apply each
// group's scale and zero point once per group:
//   out += s * (sum_k q_k x_k - z * sum_k x_k)
// MXFP4 panels hold e2m1 codes (bit 3 sign, bits 2..1 exponent, bit 0 mantissa) whose value v(q)
// is a table lookup (exact in f32 and bf16), no zero point, and one power-of-two scale per 32 k:
//   out += s * sum_k v(q_k) x_k
// which needs each activation row's sum over each group, and keeps the inner loop at load,
// extend, (split nibbles,) convert and FMAs against broadcast activations, one converted vector
// reused by every token of the tile.
#include <cstddef>
#include <cstdint>

namespace qmoe::cpu {

inline constexpr int kHalfRows = 16;
inline constexpr int kTileRows = 2 * kHalfRows;  // a panel; one kernel call covers one
inline constexpr int kMaxTileTokens = 16;

// Bytes of a group's header: e8m0 bytes (e2m1), or f32 scales and, with zero points, u8 zeros.
constexpr int64_t panel_header_bytes(bool e2m1, bool zero_points) {
  return e2m1 ? kTileRows : kTileRows * 4 + (zero_points ? kTileRows : 0);
}

struct PanelFormat {
  int bits = 4;              // 4 or 8
  bool e2m1 = false;         // 4-bit e2m1 float codes (MXFP4), zero 0; else unsigned integers
  bool zero_points = false;  // false: implicit zero 2^(bits-1) (0 for e2m1)
  int64_t groups = 1;        // along K
  int64_t group_k = 0;       // K elements per group (even for 4-bit)

  int64_t K() const { return groups * group_k; }
  int64_t header_bytes() const { return panel_header_bytes(e2m1, zero_points); }
  int64_t code_bytes_per_group() const { return group_k * kTileRows * bits / 8; }
  int64_t group_bytes() const { return header_bytes() + code_bytes_per_group(); }
  int64_t panel_bytes() const { return groups * group_bytes(); }
};

// out[t][r] = sum_k W[r, k] * x[t][k] for the 32 rows of one panel and `tokens` activation rows
// of K values (float, or bf16 bit patterns) in the packed K order.
template <class X>
struct PanelTileOf {
  const uint8_t* panel;
  const X* const* x;              // [tokens] pointers to K values
  const float* const* group_sum;  // [tokens] pointers to `groups` sums of x over each group
  int tokens;                     // 1..max tokens of the kernel
  float* out;                     // [tokens][kTileRows]
};
using PanelTile = PanelTileOf<float>;
using PanelTileBf16 = PanelTileOf<uint16_t>;

}  // namespace qmoe::cpu
