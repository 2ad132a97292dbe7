#include <cmath>
#include <cstdint>

#include "cuda/dependent_launch.cuh"
#include "cuda/routing.hpp"
#include "cuda/routing_fault.cuh"
#include "cuda/warp_reduce.cuh"

namespace qmoe {

namespace {

using cuda::kFullWarp;

constexpr int kWarpsPerBlock = 4;

// Group scores as the CPU reference defines them: the max of each group's selection scores, or,
// with a correction bias, the sum of its top two (ties count twice). choice_sh holds this warp's
// [E] selection scores; each lane scores groups lane, lane + 32, ...
__device__ void score_groups(const float* choice_sh, int n_group, int per_group, bool top2,
                             float* group_score_sh) {
  for (int g = threadIdx.x % 32; g < n_group; g += 32) {
    float first = -INFINITY, second = -INFINITY;
    for (int e = g * per_group; e < (g + 1) * per_group; ++e) {
      const float v = choice_sh[e];
      if (v > first) {
        second = first;
        first = v;
      } else if (v > second) {
        second = v;
      }
    }
    group_score_sh[g] = top2 ? first + second : first;
  }
}

// Marks the topk_group best groups (ties: lower group id) in kept_sh, by rounds of warp arg-max.
__device__ void keep_best_groups(const float* group_score_sh, int n_group, int topk_group,
                                 int* kept_sh) {
  const int lane = threadIdx.x % 32;
  for (int g = lane; g < n_group; g += 32) kept_sh[g] = 0;
  __syncwarp();
  for (int round = 0; round < topk_group; ++round) {
    unsigned best_key = 0, best_group = 0xffffffffu;  // groups visited in increasing order
    for (int g = lane; g < n_group; g += 32) {
      const unsigned key = kept_sh[g] ? 0u : cuda::order_key(group_score_sh[g]);
      if (key > best_key) {
        best_key = key;
        best_group = static_cast<unsigned>(g);
      }
    }
    const unsigned winner = cuda::warp_argmax_index(best_key, best_group);
    __syncwarp();
    if (lane == 0) kept_sh[winner] = 1;
    __syncwarp();
  }
}

// One warp per token. Lane l holds experts e = i*32 + l for i < V (V*32 >= E), so the loads of a
// logits row are coalesced. Selection is k rounds of warp arg-max; a chosen expert's key drops
// to 0.
template <int V>
__global__ void __launch_bounds__(kWarpsPerBlock * 32)
    route_topk_kernel(RoutingParams p, const float* __restrict__ logits, int64_t row_stride,
                      int64_t M, int E, float* __restrict__ topk_weights,
                      int32_t* __restrict__ topk_ids) {
  extern __shared__ float group_sh[];
  cuda::wait_for_prior_grids();
  cuda::release_dependent_grids();
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int64_t m = int64_t(blockIdx.x) * kWarpsPerBlock + warp;
  if (m >= M) return;  // uniform per warp
  const float* row = logits + m * row_stride;

  float score[V], choice[V];
#pragma unroll
  for (int i = 0; i < V; ++i) {
    const int e = i * 32 + lane;
    score[i] = e < E ? row[e] : -INFINITY;
  }
  if (p.scoring == Scoring::softmax) {
    float peak = -INFINITY;
#pragma unroll
    for (int i = 0; i < V; ++i) peak = fmaxf(peak, score[i]);
    peak = cuda::warp_max(peak);
    float sum = 0.0f;
#pragma unroll
    for (int i = 0; i < V; ++i) {
      score[i] = i * 32 + lane < E ? expf(score[i] - peak) : 0.0f;
      sum += score[i];
    }
    sum = cuda::warp_sum(sum);
#pragma unroll
    for (int i = 0; i < V; ++i) score[i] /= sum;
  } else {
#pragma unroll
    for (int i = 0; i < V; ++i) score[i] = 1.0f / (1.0f + expf(-score[i]));
  }
#pragma unroll
  for (int i = 0; i < V; ++i) {
    const int e = i * 32 + lane;
    choice[i] = e < E ? score[i] + (p.correction_bias ? p.correction_bias[e] : 0.0f) : -INFINITY;
  }

  if (p.n_group > 0) {
    // Per-warp shared slices: [E] selection scores, [n_group] group scores, [n_group] kept flags.
    float* choice_sh = group_sh + warp * (E + 2 * p.n_group);
    float* group_score_sh = choice_sh + E;
    int* kept_sh = reinterpret_cast<int*>(group_score_sh + p.n_group);
#pragma unroll
    for (int i = 0; i < V; ++i)
      if (i * 32 + lane < E) choice_sh[i * 32 + lane] = choice[i];
    __syncwarp();
    const int per_group = E / p.n_group;
    score_groups(choice_sh, p.n_group, per_group, p.correction_bias != nullptr, group_score_sh);
    __syncwarp();
    keep_best_groups(group_score_sh, p.n_group, p.topk_group, kept_sh);
#pragma unroll
    for (int i = 0; i < V; ++i) {
      const int e = i * 32 + lane;
      if (e < E && !kept_sh[e / per_group]) choice[i] = -INFINITY;
    }
  }

  unsigned key[V];
#pragma unroll
  for (int i = 0; i < V; ++i) key[i] = i * 32 + lane < E ? cuda::order_key(choice[i]) : 0u;
  float slot_weight = 0.0f;  // lane j keeps slot j
  int slot_id = 0;
  for (int j = 0; j < p.top_k; ++j) {
    // This lane's best as a tree over its V keys; on equal keys the lower i (lower expert) stays.
    unsigned best_key[V];
    int best_i[V];
#pragma unroll
    for (int i = 0; i < V; ++i) {
      best_key[i] = key[i];
      best_i[i] = i;
    }
#pragma unroll
    for (int step = 1; step < V; step *= 2)
#pragma unroll
      for (int i = 0; i + step < V; i += 2 * step)
        if (best_key[i + step] > best_key[i]) {
          best_key[i] = best_key[i + step];
          best_i[i] = best_i[i + step];
        }
    const unsigned winner = cuda::warp_argmax_index(
        best_key[0], best_key[0] ? static_cast<unsigned>(best_i[0] * 32 + lane) : 0xffffffffu);
    const int owner = static_cast<int>(winner % 32), slot = static_cast<int>(winner / 32);
    float winner_score = 0.0f;
#pragma unroll
    for (int i = 0; i < V; ++i)
      if (i == slot) {
        winner_score = score[i];
        if (lane == owner) key[i] = 0u;
      }
    winner_score = __shfl_sync(kFullWarp, winner_score, owner);
    if (lane == j) {
      slot_weight = winner_score;
      slot_id = static_cast<int>(winner);
    }
  }
  // The sum runs in slot order, as on the CPU, so renormalized weights agree bit for bit when
  // the scores do.
  float sum = 0.0f;
  for (int j = 0; j < p.top_k; ++j) sum += __shfl_sync(kFullWarp, slot_weight, j);
  if (lane < p.top_k) {
    float w = slot_weight;
    if (p.renormalize) w /= sum;
    w *= p.routed_scaling_factor;
    // Non-finite logits make non-finite weights: reported, not silent (routing_report.hpp).
    if (!isfinite(w))
      cuda::report_routing_fault(p.fault, RoutingFault::weight, m * p.top_k + lane,
                                 __float_as_uint(w));
    topk_weights[m * p.top_k + lane] = w;
    topk_ids[m * p.top_k + lane] = slot_id;
  }
}

template <int V>
cudaError_t launch_route(const RoutingParams& p, const float* logits, int64_t row_stride, int64_t M,
                         int E, float* topk_weights, int32_t* topk_ids, cudaStream_t stream) {
  const size_t shared =
      p.n_group > 0 ? sizeof(float) * kWarpsPerBlock * (E + 2 * size_t(p.n_group)) : 0;
  const auto blocks = static_cast<unsigned>((M + kWarpsPerBlock - 1) / kWarpsPerBlock);
  return cuda::launch_dependent(route_topk_kernel<V>, blocks, kWarpsPerBlock * 32, shared, stream,
                                p, logits, row_stride, M, E, topk_weights, topk_ids);
}

// The limits the kernel relies on for memory safety; validate_routing explains them to users.
bool routing_valid(const RoutingParams& p, int64_t E) {
  if (E < 1 || E > kMaxRoutingExperts) return false;
  if (p.top_k < 1 || p.top_k > kMaxRoutingTopK || p.top_k > E) return false;
  if (p.n_group < 0) return false;
  if (p.n_group == 0) return true;
  if (E % p.n_group != 0 || p.topk_group < 1 || p.topk_group > p.n_group) return false;
  return p.correction_bias == nullptr || E / p.n_group >= 2;
}

}  // namespace

cudaError_t route_topk_cuda(const RoutingParams& p, const float* logits, int64_t row_stride,
                            int64_t M, int64_t E, float* topk_weights, int32_t* topk_ids,
                            cudaStream_t stream) {
  if (!routing_valid(p, E) || M < 0) return cudaErrorInvalidValue;
  if (M == 0) return cudaSuccess;
  const int e = static_cast<int>(E);
  if (E <= 32) return launch_route<1>(p, logits, row_stride, M, e, topk_weights, topk_ids, stream);
  if (E <= 64) return launch_route<2>(p, logits, row_stride, M, e, topk_weights, topk_ids, stream);
  if (E <= 128) return launch_route<4>(p, logits, row_stride, M, e, topk_weights, topk_ids, stream);
  if (E <= 256) return launch_route<8>(p, logits, row_stride, M, e, topk_weights, topk_ids, stream);
  return launch_route<16>(p, logits, row_stride, M, e, topk_weights, topk_ids, stream);
}

}  // namespace qmoe
