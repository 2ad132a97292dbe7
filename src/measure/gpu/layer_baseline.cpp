#include "measure/gpu/layer_baseline.hpp"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>

#include "backend/emulation/dense_forward.hpp"
#include "core/check.hpp"
#include "cuda/cuda_check.hpp"
#include "measure/gpu/ceilings.hpp"
#include "measure/gpu/cublas_check.hpp"
#include "measure/gpu/cublas_moe.hpp"

namespace qmoe::bench {

namespace {

// A cuBLAS handle and a non-blocking stream on one device, for the ceilings and the baseline.
struct CudaContext {
  explicit CudaContext(int device) {
    QMOE_CUDA_CHECK(cudaSetDevice(device));
    QMOE_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    QMOE_CUBLAS_CHECK(cublasCreate(&handle));
  }
  ~CudaContext() {
    cublasDestroy(handle);
    cudaStreamDestroy(stream);
  }
  CudaContext(const CudaContext&) = delete;
  CudaContext& operator=(const CudaContext&) = delete;
  cudaStream_t stream = nullptr;
  cublasHandle_t handle = nullptr;
};

DeviceBuffer to_device(const void* host, size_t bytes) {
  DeviceBuffer out(bytes);
  out.upload(host, bytes);
  return out;
}

DeviceBuffer to_device_bf16(const QuantizedWeight& w) {
  const Buffer dense = dequantize_weight(w);  // f32 [E, N, K]
  std::vector<uint16_t> bits(static_cast<size_t>(dense.numel()));
  std::transform(dense.span<float>().begin(), dense.span<float>().end(), bits.begin(),
                 [](float v) { return to_bf16(v).bits; });
  return to_device(bits.data(), bits.size() * 2);
}

// A token set as the baseline reads it: the pairs (token, slot) grouped by expert, in pair order
// inside an expert (what align_by_expert_cuda gives with tiles of one row).
RoutingSet routed_on_host(const Shape& s, const Buffer& hidden, const Buffer& topk_weights,
                          const Buffer& topk_ids) {
  RoutingSet r;
  r.M = hidden.dim(0);
  const int64_t pairs = r.M * s.k;
  check(hidden.dtype() == DType::bf16 && hidden.dim(1) == s.H && topk_ids.numel() == pairs &&
            topk_weights.numel() == pairs,
        "cuBLAS baseline: token set is {} [{}, {}] with {} ids, expected bf16 [M, {}] and M * {}",
        name(hidden.dtype()), hidden.dim(0), hidden.dim(1), topk_ids.numel(), s.H, s.k);
  r.ids_host.assign(topk_ids.span<int32_t>().begin(), topk_ids.span<int32_t>().end());
  r.expert_offsets.assign(static_cast<size_t>(s.E + 1), 0);
  for (const int32_t e : r.ids_host) {
    check(e >= 0 && e < s.E, "cuBLAS baseline: expert id {} outside 0..{}", e, s.E - 1);
    ++r.expert_offsets[e + 1];
  }
  for (int64_t e = 0; e < s.E; ++e) {
    r.experts_hit += r.expert_offsets[e + 1] > 0;
    r.expert_offsets[e + 1] += r.expert_offsets[e];
  }
  std::vector<int32_t> next(r.expert_offsets.begin(), r.expert_offsets.end() - 1);
  std::vector<int32_t> sorted(static_cast<size_t>(pairs)), rows(static_cast<size_t>(pairs));
  for (int32_t p = 0; p < pairs; ++p) {
    const int32_t row = next[r.ids_host[p]]++;
    sorted[row] = p;
    rows[p] = row;
  }
  r.x = to_device(hidden.data(), static_cast<size_t>(hidden.nbytes()));
  r.topk_weights = to_device(topk_weights.data(), static_cast<size_t>(topk_weights.nbytes()));
  r.topk_ids = to_device(topk_ids.data(), static_cast<size_t>(topk_ids.nbytes()));
  r.sorted_pair_ids = to_device(sorted.data(), sorted.size() * 4);
  r.pair_rows = to_device(rows.data(), rows.size() * 4);
  return r;
}

}  // namespace

DeviceCeilings measure_device_ceilings(int device) {
  const CudaContext cuda(device);
  const Ceilings c = measure_ceilings(cuda.handle, cuda.stream);
  return {c.copy_bytes_per_s, c.bf16_flops_per_s};
}

std::string cublas_baseline_unfit(const MoEConfig& config, DType activation) {
  if (activation != DType::bf16)
    return fmt::format("it runs bf16 activations, not {}", name(activation));
  if (config.activation != Activation::silu)
    return fmt::format("it applies SiLU-and-multiply, not {}", name(config.activation));
  if (config.w13_bias || config.w2_bias) return "it adds no bias";
  if (config.apply_router_weight_on_input) return "it applies router weights to the output";
  return {};
}

struct CublasLayerBaseline::Impl {
  Impl(const MoEConfig& config, const QuantizedExperts& experts, int device)
      : cuda(device),
        shape{"", config.hidden, config.intermediate, config.num_experts, config.top_k()},
        w13(to_device_bf16(experts.w13())),
        w2(to_device_bf16(experts.w2())) {}
  CudaContext cuda;
  Shape shape;
  DeviceBuffer w13, w2;
  std::vector<RoutingSet> sets;
  std::vector<DeviceBuffer> outs;
  std::unique_ptr<CublasMoE> moe;
};

CublasLayerBaseline::CublasLayerBaseline(const MoEConfig& config, const QuantizedExperts& experts,
                                         int device) {
  const std::string unfit = cublas_baseline_unfit(config, DType::bf16);
  check(unfit.empty(), "cuBLAS baseline: {}", unfit);
  impl_ = std::make_unique<Impl>(config, experts, device);
}

CublasLayerBaseline::~CublasLayerBaseline() = default;

void CublasLayerBaseline::set_tokens(const std::vector<Buffer>& hidden,
                                     const std::vector<Buffer>& topk_weights,
                                     const std::vector<Buffer>& topk_ids) {
  Impl& m = *impl_;
  m.moe.reset();
  m.sets.clear();
  m.outs.clear();
  int64_t max_pairs = 1;
  for (size_t i = 0; i < hidden.size(); ++i) {
    m.sets.push_back(routed_on_host(m.shape, hidden[i], topk_weights[i], topk_ids[i]));
    m.outs.emplace_back(static_cast<size_t>(m.sets.back().M * m.shape.H * 2));
    max_pairs = std::max(max_pairs, m.sets.back().M * m.shape.k);
  }
  m.moe = std::make_unique<CublasMoE>(m.cuda.handle, m.shape, m.w13, m.w2, max_pairs);
}

void CublasLayerBaseline::run_sets() const {
  const Impl& m = *impl_;
  for (size_t i = 0; i < m.sets.size(); ++i)
    m.moe->forward(m.sets[i], m.outs[i].as<uint16_t>(), m.cuda.stream);
  QMOE_CUDA_CHECK(cudaStreamSynchronize(m.cuda.stream));
}

void CublasLayerBaseline::copy_out(size_t set, Buffer& out) const {
  const DeviceBuffer& from = impl_->outs.at(set);
  check(out.dtype() == DType::bf16 && static_cast<size_t>(out.nbytes()) == from.bytes(),
        "cuBLAS baseline: output buffer is {} of {} bytes, expected bf16 of {}", name(out.dtype()),
        out.nbytes(), from.bytes());
  from.download(out.data(), from.bytes());
}

}  // namespace qmoe::bench
