#pragma once
// The kernel's order of 4-bit codes in memory: cuda-mma's (cuda_mma/layout.hpp), so that one copy
// of a layer's int4 codes serves both backends. CUTLASS's mixed-input mainloop loads each thread's
// share of a wgmma A fragment from shared memory; it takes the codes in any order it is given as a
// cute layout (n, k, 1) -> nibble offset. cuda-mma's 32-bit step word of lane (g, t) holds exactly
// one such share (rows g and g + 8, eight nibbles in the order 0,2,4,6,1,3,5,7 of the fragment,
// which converts pairs to bf16/f16 with one byte-permute each), a lane's four step words are
// contiguous (16 bytes: a 64-channel chunk), a warp's 32 lanes make one 512-byte block of 16 rows
// by 64 channels, and the blocks run strip-major (all chunks of rows 0-15, then rows 16-31). That
// is CUTLASS's reordering atom with four atoms along K, tiled over (n, k) K first.
//
// The one difference is the order of k inside each 32-channel span: cuda-mma permutes it so that a
// lane reads 8 consecutive activations (layout.hpp), and this kernel multiplies column q of a span
// with channel int4_order::span_column_k(q) of its input. GEMM1's rows are gathered in that order
// and GEMM2's input is written in it (routing_glue.hpp, cuda/activation.hpp).
#include <cute/tensor.hpp>
// Before mixed_dtype_utils.hpp, which uses the cutlass::int8_t it brings in.
#include <cutlass/gemm/collective/collective_builder.hpp>
#include <cutlass/util/mixed_dtype_utils.hpp>

#include "backend/cuda_wgmma/grouped_gemm.hpp"
#include "cuda/int4_code_order.hpp"

namespace qmoe::cuda_wgmma {

static_assert(kTileK == int4_order::kChunk, "a K tile is one chunk of int4 codes");

template <class Mma>
constexpr auto code_atom() {
  using ValueOrder =
      cute::Layout<cute::Shape<cute::_2, cute::_4>, cute::Stride<cute::_4, cute::_1>>;
  using AtomsAlongK = cute::Layout<cute::Shape<cute::_1, cute::Int<kTileK / 16>>>;
  return cutlass::compute_memory_reordering_atom<Mma, AtomsAlongK, ValueOrder>();
}

// The (n, k, 1) -> nibble layout of one expert's [N, K] codes.
template <class Mma>
constexpr auto code_layout(int N, int K) {
  return cute::tile_to_shape(code_atom<Mma>(), cute::make_shape(N, K, cute::_1{}),
                             cute::Step<cute::_2, cute::_1, cute::_3>{});
}

}  // namespace qmoe::cuda_wgmma
