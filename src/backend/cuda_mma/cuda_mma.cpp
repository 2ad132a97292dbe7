#include "backend/cuda_mma/cuda_mma.hpp"

#include <cuda_runtime_api.h>

#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "backend/cuda_common/batched_rows.hpp"
#include "backend/cuda_common/cuda_backend.hpp"
#include "backend/cuda_common/expert_alignment.hpp"
#include "backend/cuda_common/workspace_pool.hpp"
#include "backend/cuda_mma/expert_gemm.hpp"
#include "backend/cuda_mma/repack.hpp"
#include "backend/cuda_mma/workspace_need.hpp"
#include "core/check.hpp"
#include "cuda/align.hpp"
#include "cuda/combine.hpp"
#include "cuda/cuda_check.hpp"
#include "cuda/device_buffer.hpp"
#include "cuda/device_scope.hpp"
#include "route/routing_contract.hpp"

namespace qmoe {

namespace {

using cuda_common::Workspace;
using cuda_common::WorkspacePool;
using cuda_common::WorkspaceSizes;
using cuda_mma::GemmPlan;
using cuda_mma::GemmProblem;
using cuda_mma::PackedWeightView;

struct DeviceWeight {
  PackedWeightView view;  // pointers into the buffers below
  DeviceBuffer codes, scale_pairs, zero_pairs, bias, k_source, span_group;

  explicit DeviceWeight(const cuda_mma::PackedWeight& p)
      : view(p.shape),
        codes(to_device(p.codes)),
        scale_pairs(to_device(p.scale_pairs)),
        zero_pairs(to_device(p.zero_pairs)),
        bias(to_device(p.bias)),
        k_source(to_device(p.k_source)),
        span_group(to_device(p.span_group)) {
    view.codes = codes.data();
    view.scale_pairs = scale_pairs.as<uint32_t>();
    view.zero_pairs = zero_pairs.empty() ? nullptr : zero_pairs.as<uint16_t>();
    view.bias = bias.empty() ? nullptr : bias.as<float>();
    view.k_source = k_source.empty() ? nullptr : k_source.as<int32_t>();
    view.span_group = span_group.empty() ? nullptr : span_group.as<int32_t>();
  }
};

// GEMM1 applies the activation in its epilogue; for the gated kinds that needs each output's
// gate and up rows in one strip.
std::vector<int64_t> w13_row_order(const MoEConfig& config, int64_t I) {
  if (!is_gated(config.activation)) return {};
  return cuda_mma::gated_row_order(I, config.activation == Activation::swigluoai);
}

// The host half of prepare: both weights in the kernel's layout (repack.hpp), made and checked
// without a device.
struct CudaMmaHostLayout {
  cuda_mma::PackedWeight w13, w2;

  CudaMmaHostLayout(const QuantizedExperts& experts, const MoEConfig& config)
      : w13(cuda_mma::pack_weight(experts.w13(), "w13",
                                  w13_row_order(config, experts.intermediate()))),
        w2(cuda_mma::pack_weight(experts.w2(), "w2")) {}
};

struct CudaMmaExperts final : PreparedExperts {
  using HostLayout = CudaMmaHostLayout;

  int device = 0;
  int64_t E = 0, H = 0, I = 0;
  int top_k = 1;
  DeviceWeight w13, w2;
  DeviceBuffer correction_bias;
  RoutingReport routing_report;
  // Scratch memory shared with every cuda-mma layer on the device, one workspace per stream.
  std::shared_ptr<WorkspacePool> pool;
  // This layer's sizes for the last batch size asked for (decode asks for the same one again and
  // again; computing them walks every smaller batch).
  mutable std::mutex sizes_mutex;
  mutable WorkspaceSizes last_sizes;

  CudaMmaExperts(const QuantizedExperts& experts, const HostLayout& host, const MoEConfig& config,
                 int device_index)
      : device(device_index),
        E(experts.num_experts()),
        H(experts.hidden()),
        I(experts.intermediate()),
        top_k(config.top_k()),
        w13(host.w13),
        w2(host.w2),
        correction_bias(to_device(config.routing.correction_bias)),
        pool(WorkspacePool::for_device(device_index)) {}

  // Int4 codes without act-order are in the shared order as they are (layout.hpp); act-order
  // weights carry their own logical k order and padding.
  SharedInt4Codes shared_int4_codes() const override {
    SharedInt4Codes shared;
    auto shareable = [](const DeviceWeight& w) {
      return w.view.element == cuda_mma::WeightElement::int4 && w.k_source.empty();
    };
    if (shareable(w13)) shared.w13 = w13.codes.data(), shared.w13_bytes = w13.codes.bytes();
    if (shareable(w2)) shared.w2 = w2.codes.data(), shared.w2_bytes = w2.codes.bytes();
    return shared;
  }

  WorkspaceSizes sizes_for(int64_t tokens) const {
    const std::lock_guard lock(sizes_mutex);
    if (last_sizes.tokens != tokens) last_sizes = cuda_mma::workspace_sizes(tokens, top_k, E, H, I);
    return last_sizes;
  }

  // The workspace of `stream`, able to hold `tokens` tokens of this layer; allocates only when it
  // must grow, which is an Error during graph capture (workspace_pool.hpp).
  const Workspace& workspace(cudaStream_t stream, int64_t tokens) const {
    return pool->acquire(stream, sizes_for(tokens));
  }
};

class CudaMmaBackend final : public CudaBackend<CudaMmaExperts> {
 public:
  std::string_view name() const override { return "cuda-mma"; }

  void run(const PreparedExperts& prepared, const MoEConfig& config,
           const RoutedBatch& batch) const override {
    const auto& p = static_cast<const CudaMmaExperts&>(prepared);
    DeviceScope scope(p.device);
    check_routed_batch(name(), batch, p.device, p.top_k, p.E, p.routing_report);
    check_dtype(batch.hidden.dtype());
    const auto stream = static_cast<cudaStream_t>(batch.stream);
    run_routed(p, p.workspace(stream, batch.hidden.dim(0)), config, batch, stream);
  }

  void run_batched(const PreparedExperts& prepared, const MoEConfig& config,
                   const BatchedBatch& batch) const override {
    const auto& p = static_cast<const CudaMmaExperts&>(prepared);
    DeviceScope scope(p.device);
    p.routing_report.throw_if_reported(name(), p.top_k, p.E);
    for (auto [t, what] :
         {std::pair{&batch.x, "x"}, {&batch.counts, "counts"}, {&batch.out, "out"}})
      check_on_device(name(), *t, what, p.device);
    check_dtype(batch.x.dtype());
    const auto stream = static_cast<cudaStream_t>(batch.stream);
    if (routing_checks_on()) {
      std::vector<int32_t> counts = on_host<int32_t>(batch.counts, stream);
      checked_host_counts(name(), {batch.x, TensorView(counts.data(), DType::i32, {p.E}), {}});
    }
    const int64_t rows = p.E * batch.x.dim(1);
    if (rows == 0) return;
    // The scratch of a routed forward with at least as many (token, slot) rows.
    const int64_t tokens = (rows + p.top_k - 1) / p.top_k;
    run_batched_rows(p, p.workspace(stream, tokens), config, batch, tokens, stream);
  }

 private:
  static void check_dtype(DType dtype) {
    check(dtype == DType::bf16 || dtype == DType::f16,
          "cuda-mma: hidden must be bf16 or f16, got {}", qmoe::name(dtype));
  }

  // The tile for a forward with the scratch of `tokens` routed tokens (the tallest the workspace
  // holds alignments for), lowered to what the layer's kernels run on this device.
  static int tile_rows_for(const CudaMmaExperts& p, int64_t tokens, DType dtype) {
    return cuda_mma::fitting_tile_rows(cuda_mma::choose_tile_rows(tokens, p.top_k, p.E), p.w13.view,
                                       p.w2.view, dtype);
  }

  static void run_routed(const CudaMmaExperts& p, const Workspace& ws, const MoEConfig& config,
                         const RoutedBatch& batch, cudaStream_t stream) {
    const DType dtype = batch.hidden.dtype();
    const int64_t M = batch.hidden.dim(0), k = p.top_k, pairs = M * k;
    const int tile_rows = tile_rows_for(p, M, dtype);
    const auto* ids = batch.topk_ids.data_as<const int32_t>();
    unsigned long long* fault = p.routing_report.device_word();
    // A decode batch's few pairs are aligned by GEMM1 itself (cuda_mma::FusedAlignment).
    const bool fuse_align =
        pairs <= cuda_mma::kFusedAlignPairs && tile_rows == cuda_mma::kRunTileRows;
    const AlignOutputs aligned =
        fuse_align ? cuda_common::workspace_alignment(ws, fault)
                   : cuda_common::align_in_workspace(ws, ids, pairs, p.E, tile_rows, fault, stream);
    const float* weights = batch.topk_weights.data_as<const float>();
    const bool on_input = config.apply_router_weight_on_input;
    run_gemms(p, ws, config,
              {batch.hidden.data(), p.top_k, on_input ? weights : nullptr, aligned,
               fuse_align ? ids : nullptr, tile_rows, pairs, M},
              dtype, stream);
    QMOE_CUDA_CHECK(combine_topk_cuda(dtype, ws.gemm2_out.data(), p.H, aligned.pair_rows,
                                      on_input ? nullptr : weights, M, k, p.H, batch.out.data(),
                                      p.H, stream));
  }

  // Each row of x is a (token, slot) pair of its expert at top-k 1, unweighted: the work list from
  // the counts, the same GEMMs, then each row's output back to its place in out.
  static void run_batched_rows(const CudaMmaExperts& p, const Workspace& ws,
                               const MoEConfig& config, const BatchedBatch& batch, int64_t tokens,
                               cudaStream_t stream) {
    const DType dtype = batch.x.dtype();
    const int64_t T_max = batch.x.dim(1), rows = p.E * T_max;
    const int tile_rows = tile_rows_for(p, tokens, dtype);
    AlignOutputs aligned;
    aligned.sorted_pair_ids = ws.sorted_pair_ids.as<int32_t>();
    aligned.tile_experts = ws.tile_experts.as<int32_t>();
    aligned.expert_offsets = ws.expert_offsets.as<int32_t>();
    aligned.padded_total = ws.padded_total.as<int32_t>();
    aligned.fault = p.routing_report.device_word();
    const auto* counts = batch.counts.data_as<const int32_t>();
    QMOE_CUDA_CHECK(
        cuda_common::align_batched_cuda(counts, p.E, T_max, tile_rows, aligned, stream));
    run_gemms(p, ws, config,
              {batch.x.data(), 1, nullptr, aligned, nullptr, tile_rows, rows, tokens}, dtype,
              stream);
    QMOE_CUDA_CHECK(cuda_common::scatter_batched_rows_cuda(ws.gemm2_out.data(), counts,
                                                           aligned.expert_offsets, p.E, T_max, p.H,
                                                           batch.out.data(), stream));
  }

  // What the two GEMMs read: GEMM1's input rows (row pair / top_k of `a` for each sorted pair),
  // the router weights folded into GEMM1 (nullptr: none), the alignment and its tile, and the
  // routed batch (tokens at the layer's top-k) the plans are made for. fused_topk_ids: GEMM1
  // aligns these pairs into `aligned` itself (nullptr: aligned already).
  struct GemmRows {
    const void* a;
    int top_k;
    const float* input_weights;
    AlignOutputs aligned;
    const int32_t* fused_topk_ids;
    int tile_rows;
    int64_t pairs;
    int64_t plan_tokens;
  };

  // GEMM1 (with the activation) into ws.activated, GEMM2 into ws.gemm2_out, both in sorted rows.
  static void run_gemms(const CudaMmaExperts& p, const Workspace& ws, const MoEConfig& config,
                        const GemmRows& rows, DType dtype, cudaStream_t stream) {
    const AlignSizes sizes = align_sizes(rows.pairs, p.E, rows.tile_rows);
    GemmProblem g1;
    g1.w = p.w13.view;
    g1.a = rows.a;
    g1.a_stride = p.H;
    g1.a_rows_are_tokens = true;
    g1.top_k = rows.top_k;
    g1.sorted_pair_ids = rows.aligned.sorted_pair_ids;
    g1.tile_experts = rows.aligned.tile_experts;
    g1.padded_total = rows.aligned.padded_total;
    g1.num_pairs = rows.pairs;
    g1.max_tiles = sizes.max_tiles;
    g1.topk_weights = rows.input_weights;
    g1.out = ws.activated.data();
    g1.out_stride = p.I;
    g1.fuse_activation = true;
    g1.activation = config.activation;
    g1.activation_params = config.activation_params;
    g1.act_cols = p.I;
    if (!ws.tail_flags.empty()) {
      g1.tail_partials = ws.tail_partials.as<float>();
      g1.tail_partial_bytes = int64_t(ws.tail_partials.bytes());
      g1.tail_flags = ws.tail_flags.as<int32_t>();
      g1.tail_slots = cuda_mma::kMaxTailSlots;
    }
    if (rows.fused_topk_ids) g1.fused_align = {rows.fused_topk_ids, int(p.E), rows.aligned};
    g1.next_kernel_starts_early = false;
    const GemmPlan plan1 = cuda_mma::plan_gemm(g1.w, rows.tile_rows, rows.plan_tokens, p.top_k, p.E,
                                               sizes.max_tiles, dtype);
    QMOE_CUDA_CHECK(cuda_mma::launch_expert_gemm(g1, plan1, dtype, stream));

    GemmProblem g2 = g1;
    g2.fused_align = {};  // GEMM2 reads what GEMM1 wrote
    g2.w = p.w2.view;
    g2.a = ws.activated.data();
    g2.a_stride = p.I;
    g2.a_rows_are_tokens = false;
    g2.topk_weights = nullptr;
    g2.fuse_activation = false;
    g2.next_kernel_starts_early = true;
    g2.out = ws.gemm2_out.data();
    g2.out_stride = p.H;
    const GemmPlan plan2 = cuda_mma::plan_gemm(g2.w, rows.tile_rows, rows.plan_tokens, p.top_k, p.E,
                                               sizes.max_tiles, dtype);
    QMOE_CUDA_CHECK(cuda_mma::launch_expert_gemm(g2, plan2, dtype, stream));
  }
};

}  // namespace

const Backend& cuda_mma_backend() {
  static const CudaMmaBackend backend;
  return backend;
}

}  // namespace qmoe
