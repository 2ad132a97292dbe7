// Work split and dispatch of the expert GEMM (the kernel is expert_gemm_kernel.cuh, instantiated
// once per activation dtype in the generated expert_gemm_<dtype>.cu files).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <mutex>
#include <utility>

#include "backend/cuda_mma/expert_gemm.hpp"
#include "cuda/device.hpp"

namespace qmoe::cuda_mma {

template <class T>
cudaError_t launch_typed(const GemmProblem&, const GemmPlan&, cudaStream_t);
template <class T>
int ctas_per_sm_typed(int bits, int tile_rows);

namespace {

// Resident CTAs on the current device for one kernel instance, asked once.
int resident_ctas(DType dtype, int bits, int tile_rows) {
  static std::mutex mutex;
  static std::map<std::tuple<int, DType, int, int>, int> cache;
  int device = 0;
  cudaGetDevice(&device);
  const std::lock_guard lock(mutex);
  const auto key = std::make_tuple(device, dtype, bits, tile_rows);
  if (auto it = cache.find(key); it != cache.end()) return it->second;
  const int per_sm = dtype == DType::bf16 ? ctas_per_sm_typed<__nv_bfloat16>(bits, tile_rows)
                                          : ctas_per_sm_typed<__half>(bits, tile_rows);
  const int n = per_sm * current_cuda_device().sm_count;
  cache.emplace(key, n);
  return n;
}

}  // namespace

int choose_tile_rows(int64_t M, int top_k, int64_t E) {
  const double rows_per_expert = double(M) * top_k / double(E);
  for (int rows : {8, 16, 32})
    if (rows_per_expert / rows < 0.9) return rows;
  return 64;
}

GemmPlan plan_gemm(const PackedWeightView& w, int tile_rows, int64_t M, int top_k, int64_t E,
                   int64_t max_tiles, DType dtype) {
  const int resident = resident_ctas(dtype, w.bits, tile_rows);
  // Expected tiles: experts hit by M tokens under uniform routing, each padded to whole tiles.
  const double pairs = double(M) * top_k;
  const double hit = double(E) * (1.0 - std::pow(1.0 - double(top_k) / double(E), double(M)));
  const double per_expert = pairs / std::max(hit, 1.0);
  const double tiles = std::min(double(max_tiles), hit * std::ceil(per_expert / tile_rows));

  // Fraction of the resident CTAs kept busy over whole waves, for each split; take the largest
  // strips_per_cta (least K splitting) within 10% of the best.
  double efficiency[4] = {};
  const int splits[4] = {8, 4, 2, 1};
  double best = 0.0;
  for (int i = 0; i < 4; ++i) {
    const double items = tiles * std::ceil(double(w.strips) / splits[i]);
    const double waves = std::ceil(items / resident);
    efficiency[i] = items / (waves * resident);
    if (w.chunks < 8 / splits[i]) efficiency[i] = 0.0;  // a warp per chunk at most
    best = std::max(best, efficiency[i]);
  }
  GemmPlan plan;
  plan.tile_rows = tile_rows;
  for (int i = 0; i < 4; ++i) {
    if (efficiency[i] >= 0.9 * best) {
      plan.strips_per_cta = splits[i];
      break;
    }
  }
  plan.warps_k = 8 / plan.strips_per_cta;
  const int64_t n_tiles = (w.strips + plan.strips_per_cta - 1) / plan.strips_per_cta;
  plan.grid = int(std::max<int64_t>(1, std::min<int64_t>(max_tiles * n_tiles, resident)));
  return plan;
}

cudaError_t launch_expert_gemm(const GemmProblem& problem, const GemmPlan& plan, DType dtype,
                               cudaStream_t stream) {
  if (dtype == DType::bf16) return launch_typed<__nv_bfloat16>(problem, plan, stream);
  if (dtype == DType::f16) return launch_typed<__half>(problem, plan, stream);
  return cudaErrorInvalidValue;
}

}  // namespace qmoe::cuda_mma
