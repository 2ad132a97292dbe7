#include "backend/cuda_wgmma/cuda_wgmma.hpp"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <memory>
#include <string_view>
#include <vector>

#include "backend/cuda_common/cuda_backend.hpp"
#include "backend/cuda_common/expert_alignment.hpp"
#include "backend/cuda_common/workspace_pool.hpp"
#include "backend/cuda_wgmma/kernel_weight.hpp"
#include "backend/cuda_wgmma/routing_glue.hpp"
#include "core/check.hpp"
#include "cuda/activation.hpp"
#include "cuda/align.hpp"
#include "cuda/combine.hpp"
#include "cuda/cuda_check.hpp"
#include "cuda/device_scope.hpp"

namespace qmoe {

namespace {

using cuda_common::Workspace;
using cuda_common::WorkspacePool;
using cuda_common::WorkspaceSizes;
using cuda_wgmma::KernelWeight;

constexpr std::string_view kName = "cuda-wgmma";

size_t aligned(size_t bytes) { return (bytes + 255) / 256 * 256; }

// The per-call argument arrays of one launch inside the workspace's group_args: each GEMM has one
// launch per token tile (grouped_gemm.hpp), 2 * kLaunches in all.
struct GroupArgsLayout {
  size_t shapes = 0, act_rows = 0, out_rows = 0, bytes = 0;
  explicit GroupArgsLayout(int64_t E, size_t base = 0)
      : shapes(base),
        act_rows(base + aligned(size_t(E) * 3 * sizeof(int32_t))),
        out_rows(act_rows + aligned(size_t(E) * sizeof(void*))),
        bytes(out_rows + aligned(size_t(E) * sizeof(void*)) - base) {}
};

// The partner's codes (Backend::prepare_beside) this layer reads as its own: the same weight in
// the same order, which is int4 codes without act-order of the expected size. For w13, w2 without
// act-order too: w2's channel order would reorder w13's rows (w13_kernel_rows). (cuda-mma orders
// w13's rows by the config's activation, this backend by the weights' shapes: prepare_layer
// refuses experts that disagree with the config, check_experts_match_config.)
SharedInt4Codes readable_codes(const QuantizedExperts& experts, const SharedInt4Codes& offered) {
  auto plain_int4 = [](const QuantizedWeight& w) {
    return cuda_wgmma::int4_codes(w) && !w.scheme.act_order;
  };
  auto bytes = [](const QuantizedWeight& w) { return size_t(w.E * w.N * w.K / 2); };
  const QuantizedWeight &w13 = experts.w13(), &w2 = experts.w2();
  SharedInt4Codes readable;
  if (offered.w13 && plain_int4(w13) && plain_int4(w2) && offered.w13_bytes == bytes(w13))
    readable.w13 = offered.w13, readable.w13_bytes = offered.w13_bytes;
  if (offered.w2 && plain_int4(w2) && offered.w2_bytes == bytes(w2))
    readable.w2 = offered.w2, readable.w2_bytes = offered.w2_bytes;
  return readable;
}

// The host half of prepare: every check and conversion before the upload, made without a device.
struct CudaWgmmaHostLayout {
  DType act;
  // w13's row order: cuda-mma's strips for int4 codes, w2's act-order (kernel_weight.hpp).
  std::vector<int32_t> w13_rows;
  cuda_wgmma::HostKernelWeight w13, w2;
  std::vector<float> bias13;
  std::vector<int32_t> w13_channels;

  // shared: the partner's codes the layer reads (readable_codes), which are not made again.
  CudaWgmmaHostLayout(const QuantizedExperts& experts, const MoEConfig& config,
                      const SharedInt4Codes& shared = {})
      : act(tileable_activations(experts, config)),
        w13_rows(cuda_wgmma::w13_kernel_rows(experts, config.activation)),
        w13(cuda_wgmma::to_kernel_layout(experts.w13(), act, "w13", w13_rows, !shared.w13)),
        w2(cuda_wgmma::to_kernel_layout(experts.w2(), act, "w2", {}, !shared.w2)),
        bias13(cuda_wgmma::kernel_bias(experts.w13(), w13_rows)),
        w13_channels(cuda_wgmma::gather_channels(experts.w13())) {}

 private:
  // The activation dtype, once both weights are known to tile: the row orders built next index
  // whole strips of 16 rows, so they must not see a layer the kernel refuses.
  static DType tileable_activations(const QuantizedExperts& experts, const MoEConfig& config) {
    const DType act = config.activation_dtype.value_or(DType::bf16);
    cuda_wgmma::check_tileable(experts.w13(), act, "w13");
    cuda_wgmma::check_tileable(experts.w2(), act, "w2");
    return act;
  }
};

struct CudaWgmmaExperts final : PreparedExperts {
  using HostLayout = CudaWgmmaHostLayout;

  int device = 0;
  int64_t E = 0, H = 0, I = 0, N1 = 0;
  int top_k = 1;
  DType act = DType::bf16;
  int sm_count = 0;
  KernelWeight w13, w2;
  // What the workspace needs besides per-token rows, the same for every batch (computed once:
  // CUTLASS's scratch size comes from building its arguments).
  size_t gemm_scratch_bytes = 0;
  int64_t zero_point_groups = 0;  // the most groups along K of a weight with zero points
  DeviceBuffer bias13, bias2, correction_bias;
  RoutingReport routing_report;
  // i32 [E, H]: act-order w13's input channel behind each kernel column, the order GEMM1's rows
  // are gathered in; empty without act-order (gather_span_order: int4 codes' span order then).
  DeviceBuffer w13_channels;
  bool gather_span_order = false;
  ActivationLayout activation_layout;
  std::shared_ptr<WorkspacePool> pool;

  CudaWgmmaExperts(const QuantizedExperts& experts, const HostLayout& host, const MoEConfig& config,
                   int device_index, const SharedInt4Codes& shared = {})
      : device(device_index),
        E(experts.num_experts()),
        H(experts.hidden()),
        I(experts.intermediate()),
        N1(experts.w13().N),
        top_k(config.top_k()),
        act(host.act),
        w13(cuda_wgmma::upload_kernel_weight(experts.w13(), host.w13, act, shared.w13)),
        w2(cuda_wgmma::upload_kernel_weight(experts.w2(), host.w2, act, shared.w2)),
        bias13(to_device(host.bias13)),
        bias2(to_device(experts.w2().bias.data(), size_t(experts.w2().bias.nbytes()))),
        correction_bias(to_device(config.routing.correction_bias)),
        w13_channels(to_device(host.w13_channels)),
        gather_span_order(cuda_wgmma::int4_codes(experts.w13()) && host.w13_channels.empty()),
        activation_layout{experts.gated() && cuda_wgmma::int4_codes(experts.w13()),
                          cuda_wgmma::int4_codes(experts.w2())},
        pool(WorkspacePool::for_device(device_index)) {
    QMOE_CUDA_CHECK(
        cudaDeviceGetAttribute(&sm_count, cudaDevAttrMultiProcessorCount, device_index));
    for (const KernelWeight* w : {&w13, &w2}) {
      for (int tile : cuda_wgmma::kTileTokens)
        gemm_scratch_bytes =
            std::max(gemm_scratch_bytes,
                     cuda_wgmma::gemm_ops(w->variant, tile)->workspace_bytes(int(E), sm_count));
      if (!w->zero_terms.empty())
        zero_point_groups = std::max(zero_point_groups, w->K / w->group_size);
    }
  }

  WorkspaceSizes sizes_for(int64_t tokens) const {
    check(tokens >= 1, "cuda-wgmma: a workspace holds at least 1 token, asked for {}", tokens);
    const auto pairs = size_t(tokens * top_k);
    WorkspaceSizes s =
        cuda_common::routing_sizes(tokens, top_k, E, align_sizes(int64_t(pairs), E, 1));
    s.gathered = pairs * size_t(H) * 2;
    s.gemm1_out = pairs * size_t(N1) * 2;
    s.activated = pairs * size_t(I) * 2;
    s.gemm2_out = pairs * size_t(H) * 2;
    s.group_args = 2 * cuda_wgmma::kLaunches * GroupArgsLayout(E).bytes;
    s.gemm_scratch = gemm_scratch_bytes;
    s.row_group_sums = pairs * size_t(zero_point_groups) * sizeof(float);
    return s;
  }

  const Workspace& workspace(cudaStream_t stream, int64_t tokens) const {
    return pool->acquire(stream, sizes_for(tokens));
  }
};

class CudaWgmmaBackend final : public CudaBackend<CudaWgmmaExperts> {
 public:
  std::string_view name() const override { return kName; }

  std::unique_ptr<PreparedExperts> prepare_beside(const QuantizedExperts& experts,
                                                  const MoEConfig& config, Device device,
                                                  const PreparedExperts& partner) const override {
    return prepare_layer(experts, config, device,
                         readable_codes(experts, partner.shared_int4_codes()));
  }

  void run(const PreparedExperts& prepared, const MoEConfig& config,
           const RoutedBatch& batch) const override {
    const auto& p = static_cast<const CudaWgmmaExperts&>(prepared);
    DeviceScope scope(p.device);
    check_routed_batch(kName, batch, p.device, p.top_k, p.E, p.routing_report);
    const DType dtype = batch.hidden.dtype();
    check(dtype == p.act,
          "cuda-wgmma: hidden is {} but the weights were prepared for {} activations "
          "(MoEConfig::activation_dtype)",
          qmoe::name(dtype), qmoe::name(p.act));
    const auto stream = static_cast<cudaStream_t>(batch.stream);
    run_experts(p, p.workspace(stream, batch.hidden.dim(0)), config, batch, stream);
  }

 private:
  // One grouped GEMM over the sorted rows: per-expert arguments from the alignment, then the
  // kernel's launches (one per token tile), then the zero-point terms and the bias rows when there
  // are any. The launches run one after the other on the stream, so they share CUTLASS's scratch.
  static void grouped_gemm(const CudaWgmmaExperts& p, const Workspace& ws, const KernelWeight& w,
                           const DeviceBuffer& bias, size_t args_base, const void* in, void* out,
                           int64_t rows, DType dtype, cudaStream_t stream) {
    char* args = ws.group_args.as<char>();
    const auto* offsets = ws.expert_offsets.as<int32_t>();
    cuda_wgmma::LaunchArgs launches;
    for (int i = 0; i < cuda_wgmma::kLaunches; ++i) {
      const GroupArgsLayout at(p.E, args_base + i * GroupArgsLayout(p.E).bytes);
      launches.launch[i] = {args + at.shapes, reinterpret_cast<const void**>(args + at.act_rows),
                            reinterpret_cast<void**>(args + at.out_rows)};
    }
    QMOE_CUDA_CHECK(
        cuda_wgmma::fill_group_args_cuda(offsets, p.E, w.N, w.K, in, out, launches, stream));
    for (int i = 0; i < cuda_wgmma::kLaunches; ++i) {
      const cuda_wgmma::GroupArgs& g = launches.launch[i];
      cuda_wgmma::GroupCall call;
      call.problem_shapes = g.shapes;
      call.act_rows = g.act_rows;
      call.out_rows = g.out_rows;
      call.workspace = ws.gemm_scratch.data();
      call.workspace_bytes = ws.gemm_scratch.bytes();
      call.sm_count = p.sm_count;
      QMOE_CUDA_CHECK(
          cuda_wgmma::gemm_ops(w.variant, cuda_wgmma::kTileTokens[i])->run(w, call, stream));
    }
    if (!w.zero_terms.empty()) {
      auto* sums = ws.row_group_sums.as<float>();
      QMOE_CUDA_CHECK(cuda_wgmma::group_sums_cuda(dtype, in, w.K, w.group_size, offsets, p.E, rows,
                                                  sums, stream));
      QMOE_CUDA_CHECK(cuda_wgmma::add_zero_terms_cuda(
          dtype, out, w.N, sums, w.K / w.group_size, w.zero_terms.as<float>(),
          ws.tile_experts.as<int32_t>(), offsets, p.E, rows, stream));
    }
    if (!bias.empty()) {
      QMOE_CUDA_CHECK(cuda_wgmma::add_expert_bias_cuda(dtype, out, w.N, bias.as<float>(), offsets,
                                                       p.E, rows, stream));
    }
  }

  static void run_experts(const CudaWgmmaExperts& p, const Workspace& ws, const MoEConfig& config,
                          const RoutedBatch& batch, cudaStream_t stream) {
    const DType dtype = batch.hidden.dtype();
    const int64_t M = batch.hidden.dim(0), k = p.top_k, pairs = M * k;
    const AlignOutputs aligned =
        cuda_common::align_in_workspace(ws, batch.topk_ids.data_as<const int32_t>(), pairs, p.E, 1,
                                        p.routing_report.device_word(), stream);
    const bool weights_first = config.apply_router_weight_on_input;
    const float* weights = batch.topk_weights.data_as<const float>();
    QMOE_CUDA_CHECK(cuda_wgmma::gather_rows_cuda(
        dtype, batch.hidden.data(), p.H, aligned.sorted_pair_ids, p.top_k,
        weights_first ? weights : nullptr, p.w13_channels.as<int32_t>(), p.gather_span_order,
        aligned.expert_offsets, p.E, pairs, ws.gathered.data(), stream));
    grouped_gemm(p, ws, p.w13, p.bias13, 0, ws.gathered.data(), ws.gemm1_out.data(), pairs, dtype,
                 stream);
    QMOE_CUDA_CHECK(activation_cuda(config.activation, config.activation_params, dtype,
                                    ws.gemm1_out.data(), p.N1, ws.activated.data(), p.I, pairs, p.I,
                                    aligned.padded_total, stream, p.activation_layout));
    grouped_gemm(p, ws, p.w2, p.bias2, cuda_wgmma::kLaunches * GroupArgsLayout(p.E).bytes,
                 ws.activated.data(), ws.gemm2_out.data(), pairs, dtype, stream);
    QMOE_CUDA_CHECK(combine_topk_cuda(dtype, ws.gemm2_out.data(), p.H, aligned.pair_rows,
                                      weights_first ? nullptr : weights, M, k, p.H,
                                      batch.out.data(), p.H, stream));
  }
};

}  // namespace

const Backend& cuda_wgmma_backend() {
  static const CudaWgmmaBackend backend;
  return backend;
}

}  // namespace qmoe
