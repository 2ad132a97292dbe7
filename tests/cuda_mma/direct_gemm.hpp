#pragma once
// One cuda-mma expert GEMM launched directly (not through a forward), for tests of plans a
// forward may not reach on a given batch: random weights packed and uploaded, sorted rows in
// tiles of one expert each (up to two tiles' worth less 3 rows per expert, the last expert at
// least one row, or the rows the spec gives; and one tile of no expert), activations, and the
// float64 product.
#include <cstdint>
#include <random>
#include <vector>

#include "backend/cuda_mma/expert_gemm.hpp"
#include "backend/cuda_mma/repack.hpp"
#include "cuda/device_buffer.hpp"
#include "qmoe/tensor.hpp"
#include "support/moe_case.hpp"

namespace qmoe::test {

using cuda_mma::GemmPlan;
using cuda_mma::GemmProblem;

struct DirectGemmSpec {
  QuantScheme scheme;
  int64_t N, K;
  DType dtype;
  // GEMM1's form: N = 2I gate and up rows packed for the fused silu (gated_row_order), rows
  // read from tokens (two pairs per token), router weights; else GEMM2's plain rows.
  bool fused = false;
  int tile = 8;  // rows per tile
  int64_t experts = 6;
  // Rows of each expert (then `experts` is its size); empty: random, as the header says.
  std::vector<int> expert_rows = {};
};

class DirectGemm {
 public:
  explicit DirectGemm(const DirectGemmSpec& spec);

  // Launches `plan` (after the instance's shared-memory opt-in) and returns the padded output.
  // Unwritten elements read NaN.
  Buffer run(const GemmPlan& plan);
  // ||out - float64 product|| / ||product|| over the real rows.
  double error_against_float64(const Buffer& out) const;

  int64_t tiles() const { return int64_t(tile_experts_.size()); }
  int64_t out_cols() const { return spec_.fused ? spec_.N / 2 : spec_.N; }

  GemmProblem problem;  // tests may set the optional fields (tail buffers)

 private:
  DirectGemmSpec spec_;
  std::mt19937_64 rng_;
  QuantizedWeight weight_;
  cuda_mma::PackedWeight packed_;
  std::vector<int32_t> sorted_pairs_, tile_experts_;
  std::vector<int64_t> row_expert_;  // per sorted row, -1 for padding
  std::vector<float> router_;
  int32_t pairs_ = 0;
  Buffer a_;
  DeviceBuffer codes_, scales_, zeros_, bias_, a_dev_, pairs_dev_, tiles_dev_, total_dev_,
      router_dev_;
};

}  // namespace qmoe::test
