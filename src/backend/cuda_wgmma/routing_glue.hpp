#pragma once
// The element-wise steps around cuda-wgmma's grouped GEMMs: rows gathered by expert, the
// per-expert GEMM arguments, and bias rows. Sorted rows are the alignment's order at one-row
// tiles (cuda/align.hpp): expert e's rows are expert_offsets[e] .. expert_offsets[e+1]-1, and
// expert_offsets[E] rows in all. No host sync, fixed launch shapes (graph-capturable).
#include <cuda_runtime_api.h>

#include <cstdint>

#include "backend/cuda_wgmma/grouped_gemm.hpp"
#include "qmoe/dtype.hpp"

namespace qmoe::cuda_wgmma {

// rows[r, c] = hidden[sorted_pair_ids[r] / top_k, channels[e, c]] (times
// pair_weights[sorted_pair_ids[r]] when that is not nullptr) for the expert e of sorted row r,
// for r < expert_offsets[E]; channels: i32 [E, H] per-expert channel orders (act-order), nullptr
// for the identity, or (span_order, without channels) the shared int4 order of each 32-channel
// span (cuda/int4_code_order.hpp: column q holds channel span_column_k(q)). max_rows bounds the
// launch. H must be a multiple of 8 (16-byte accesses), of 32 in span order.
cudaError_t gather_rows_cuda(DType dtype, const void* hidden, int64_t H,
                             const int32_t* sorted_pair_ids, int top_k, const float* pair_weights,
                             const int32_t* channels, bool span_order,
                             const int32_t* expert_offsets, int64_t E, int64_t max_rows, void* rows,
                             cudaStream_t stream);

// The per-expert arguments of one grouped-GEMM launch (grouped_gemm.hpp's GroupCall), [E] each:
// shapes[e] = (N, rows, K) as three int32, act_rows[e] = act + the launch's first row of e * K
// elements, out_rows[e] = out + that row * N elements (16-bit elements).
struct GroupArgs {
  void* shapes;
  const void** act_rows;
  void** out_rows;
};
// Splits each expert's m_e rows between the launches of kTileTokens (grouped_gemm.hpp): the
// first gets the whole 256-token tiles (and a remainder too large for the smaller tiles), one of
// the others the remainder.
struct LaunchArgs {
  GroupArgs launch[kLaunches];
};
cudaError_t fill_group_args_cuda(const int32_t* expert_offsets, int64_t E, int64_t N, int64_t K,
                                 const void* act, void* out, const LaunchArgs& launches,
                                 cudaStream_t stream);

// rows[r, n] += bias[e, n] for the expert e of sorted row r (f32 math, one rounding).
cudaError_t add_expert_bias_cuda(DType dtype, void* rows, int64_t N, const float* bias,
                                 const int32_t* expert_offsets, int64_t E, int64_t max_rows,
                                 cudaStream_t stream);

// Zero points (grouped_gemm.hpp): sums[r, g] = sum of in[r, k] over k in group g (f32), for the
// rows r < expert_offsets[E]; then out[r, n] += sum over g of sums[r, g] * zero_terms[e, g, n]
// for the expert e = row_experts[r] of row r (the alignment's tile_experts at one-row tiles; f32
// math, one rounding). G = K / group.
cudaError_t group_sums_cuda(DType dtype, const void* in, int64_t K, int64_t group,
                            const int32_t* expert_offsets, int64_t E, int64_t max_rows, float* sums,
                            cudaStream_t stream);
// N must be a multiple of 16.
cudaError_t add_zero_terms_cuda(DType dtype, void* out, int64_t N, const float* sums, int64_t G,
                                const float* zero_terms, const int32_t* row_experts,
                                const int32_t* expert_offsets, int64_t E, int64_t max_rows,
                                cudaStream_t stream);

}  // namespace qmoe::cuda_wgmma
