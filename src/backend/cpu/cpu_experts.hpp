#pragma once
// What `prepare` hands to `run`: both weights packed, the kernel chosen, and a workspace reused
// by forwards (so a forward does not page in fresh memory each time).
#include <cstdint>
#include <mutex>
#include <vector>

#include "backend/backend.hpp"
#include "backend/cpu/packed_weight.hpp"
#include "backend/cpu/tile_kernel.hpp"

namespace qmoe::cpu {

struct Workspace {
  std::vector<int64_t> expert_begin;  // [E + 1]: rows of expert e are [begin[e], begin[e+1])
  std::vector<int32_t> row_of_pair;   // [M * k]: row of (token m, slot j) at m * k + j
  std::vector<int32_t> pair_of_row;   // [M * k]
  // GEMM1 input rows, when hidden cannot be read in place (another dtype, act order, or the
  // router weight folded in), and their sums over each w13 group (panel_format.hpp).
  std::vector<float> x;
  std::vector<const float*> x_rows;  // [rows]: the GEMM1 input of each row
  // The same as bf16, when the bf16 kernel runs GEMM1 (bf16 activations, TileKernel::run_bf16).
  std::vector<uint16_t> x_bf16;
  std::vector<const uint16_t*> x_rows_bf16;
  std::vector<float> group_sum;
  std::vector<const float*> group_sum_rows;  // [rows]: the sums of each row's input
  // [rows, I]: activation output = GEMM2 input, in w2's K order, f32 or (gemm2_in_bf16) bf16;
  // with its sums over each w2 group.
  std::vector<float> act;
  std::vector<const float*> act_rows;
  std::vector<uint16_t> act_bf16;
  std::vector<const uint16_t*> act_rows_bf16;
  std::vector<float> act_group_sum;
  std::vector<const float*> act_group_sum_rows;
  std::vector<float> y;  // [rows, H]: GEMM2 output with bias
};

struct CpuExperts final : PreparedExperts {
  int64_t E = 0, H = 0, I = 0;
  bool gated = true;
  PackedMatrix w13;  // gated: panel q = gate rows of j in [16q, 16q+16), then their up rows
  PackedMatrix w2;   // panel q = rows [32q, 32q + 32)
  // [E, I]: where intermediate channel j sits in w2's packed K order. Empty = identity.
  std::vector<int32_t> w2_position;
  TileKernel kernel{};

  mutable std::mutex workspace_mutex;
  mutable Workspace workspace;
};

// The whole forward on prepared weights (cpu_forward.cpp), routed or batched by expert.
void cpu_forward(const CpuExperts& experts, const MoEConfig& config, const RoutedBatch& batch);
void cpu_forward_batched(const CpuExperts& experts, const MoEConfig& config,
                         const BatchedBatch& batch);

}  // namespace qmoe::cpu
