#include "measure/gpu/cublas_moe.hpp"

#include "cuda/activation.hpp"
#include "cuda/combine.hpp"
#include "cuda/cuda_check.hpp"
#include "measure/gpu/bench_kernels.hpp"
#include "measure/gpu/cublas_check.hpp"

namespace qmoe::bench {

namespace {

// Row-major C[m, n] = A[m, k] W[n, k]^T, all bf16, fp32 accumulation. In cuBLAS's column-major
// terms that is C^T (n x m) = W (op T of the stored k x n) * A^T (stored k x m).
void gemm_rows_by_weight(cublasHandle_t h, int64_t m, int64_t n, int64_t k, const void* a,
                         const void* w, void* c) {
  const float one = 1.0f, zero = 0.0f;
  QMOE_CUBLAS_CHECK(cublasGemmEx(
      h, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(n), static_cast<int>(m), static_cast<int>(k),
      &one, w, CUDA_R_16BF, static_cast<int>(k), a, CUDA_R_16BF, static_cast<int>(k), &zero, c,
      CUDA_R_16BF, static_cast<int>(n), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

constexpr size_t kCublasWorkspaceBytes = size_t(64) << 20;

}  // namespace

CublasMoE::CublasMoE(cublasHandle_t handle, const Shape& shape, const DeviceBuffer& w13_bf16,
                     const DeviceBuffer& w2_bf16, int64_t max_pairs)
    : handle_(handle),
      shape_(shape),
      w13_(w13_bf16),
      w2_(w2_bf16),
      rows_(max_pairs * shape.H * 2),
      gate_up_(max_pairs * 2 * shape.I * 2),
      act_(max_pairs * shape.I * 2),
      down_(max_pairs * shape.H * 2),
      cublas_workspace_(kCublasWorkspaceBytes) {}

void CublasMoE::forward(const RoutingSet& set, uint16_t* out, cudaStream_t stream) const {
  const int64_t H = shape_.H, I = shape_.I, k = shape_.k, pairs = set.M * k;
  // A workspace of our own keeps cuBLAS from allocating while a graph is captured.
  QMOE_CUBLAS_CHECK(cublasSetStream(handle_, stream));
  QMOE_CUBLAS_CHECK(
      cublasSetWorkspace(handle_, cublas_workspace_.data(), cublas_workspace_.bytes()));
  QMOE_CUDA_CHECK(gather_rows_bf16(set.x.as<uint16_t>(), set.sorted_pair_ids.as<int32_t>(), pairs,
                                   k, H, rows_.as<uint16_t>(), stream));
  auto* rows = rows_.as<uint16_t>();
  auto* gate_up = gate_up_.as<uint16_t>();
  auto* act = act_.as<uint16_t>();
  auto* down = down_.as<uint16_t>();
  const auto* w13 = w13_.as<uint16_t>();
  const auto* w2 = w2_.as<uint16_t>();
  for (int64_t e = 0; e < shape_.E; ++e) {
    const int64_t first = set.expert_offsets[e], count = set.expert_offsets[e + 1] - first;
    if (count == 0) continue;
    gemm_rows_by_weight(handle_, count, 2 * I, H, rows + first * H, w13 + e * 2 * I * H,
                        gate_up + first * 2 * I);
  }
  QMOE_CUDA_CHECK(activation_cuda(Activation::silu, {}, DType::bf16, gate_up, 2 * I, act, I, pairs,
                                  I, nullptr, stream));
  for (int64_t e = 0; e < shape_.E; ++e) {
    const int64_t first = set.expert_offsets[e], count = set.expert_offsets[e + 1] - first;
    if (count == 0) continue;
    gemm_rows_by_weight(handle_, count, H, I, act + first * I, w2 + e * H * I, down + first * H);
  }
  QMOE_CUDA_CHECK(combine_topk_cuda(DType::bf16, down, H, set.pair_rows.as<int32_t>(),
                                    set.topk_weights.as<float>(), set.M, k, H, out, H, stream));
}

}  // namespace qmoe::bench
