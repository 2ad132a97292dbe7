#pragma once
// The CUTLASS types of one cuda-wgmma variant and the four operations of GemmOps on them
// (grouped_gemm.hpp). Included only by the generated instance files, one per variant, because a
// variant takes minutes to compile.
#include <cutlass/cutlass.h>
#include <cutlass/gemm/device/gemm_universal_adapter.h>
#include <cute/tensor.hpp>
#include <cutlass/epilogue/collective/collective_builder.hpp>
#include <cutlass/gemm/collective/collective_builder.hpp>
#include <cutlass/gemm/dispatch_policy.hpp>
#include <cutlass/gemm/group_array_problem_shape.hpp>
#include <cutlass/gemm/kernel/gemm_universal.hpp>
#include <cutlass/util/packed_stride.hpp>

#include <vector>

#include "backend/cuda_wgmma/argument_blob.hpp"
#include "backend/cuda_wgmma/code_order.hpp"
#include "backend/cuda_wgmma/grouped_gemm.hpp"

namespace qmoe::cuda_wgmma {

template <class Code, class Mma, int kTileTokens>
struct GemmInstance {
  using ProblemShape = cutlass::gemm::GroupProblemShape<cute::Shape<int, int, int>>;
  static_assert(sizeof(ProblemShape::UnderlyingProblemShape) == 3 * sizeof(int32_t),
                "fill_group_args writes problem shapes as three int32");

  // Weights: [N, K] K-major, CUTLASS's A (row-major). Tokens: [m, K] row-major, CUTLASS's B
  // (column-major K x m). Output [m, N] row-major = column-major N x m.
  using LayoutCodes = cutlass::layout::RowMajor;
  using LayoutAct = cutlass::layout::ColumnMajor;
  using LayoutOut = cutlass::layout::ColumnMajor;
  using StrideCodes = cute::remove_pointer_t<cutlass::detail::TagToStrideA_t<LayoutCodes*>>;
  using StrideAct = cute::remove_pointer_t<cutlass::detail::TagToStrideB_t<LayoutAct*>>;
  static constexpr int kAlignCodes = 128 / cutlass::sizeof_bits<Code>::value;
  static constexpr int kAlignAct = 128 / cutlass::sizeof_bits<Mma>::value;
  static constexpr bool kMmaOrder = cutlass::sizeof_bits<Code>::value == 4;

  // 4-bit codes in cuda-mma's order (code_order.hpp).
  using CodeLayoutMmaOrder = decltype(code_layout<Mma>(0, 0));
  using CodeLayoutArg = std::conditional_t<kMmaOrder, CodeLayoutMmaOrder, StrideCodes>;

  using TileShape = cute::Shape<cute::_128, cute::Int<kTileTokens>, cute::Int<kTileK>>;
  using ClusterShape = cute::Shape<cute::_1, cute::_1, cute::_1>;
  using Epilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape,
      cutlass::epilogue::collective::EpilogueTileAuto, float, float, void, LayoutOut*, kAlignAct,
      Mma, LayoutOut*, kAlignAct,
      cutlass::epilogue::PtrArrayTmaWarpSpecializedCooperative>::CollectiveOp;
  using Mainloop = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, cute::tuple<Code, Mma>,
      std::conditional_t<kMmaOrder, CodeLayoutMmaOrder*, LayoutCodes*>, kAlignCodes, Mma,
      LayoutAct*, kAlignAct, float, TileShape, ClusterShape,
      cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(
          sizeof(typename Epilogue::SharedStorage))>,
      cutlass::gemm::KernelPtrArrayTmaWarpSpecializedCooperative>::CollectiveOp;
  using Kernel = cutlass::gemm::kernel::GemmUniversal<ProblemShape, Mainloop, Epilogue>;
  using Gemm = cutlass::gemm::device::GemmUniversalAdapter<Kernel>;
  using StrideScale = typename Mainloop::StrideScale;
  using StrideOut = typename Kernel::InternalStrideD;

  static typename Gemm::Arguments arguments(const KernelWeight& w, const GroupCall& call) {
    typename Gemm::Arguments args;
    args.mode = cutlass::gemm::GemmUniversalMode::kGrouped;
    args.problem_shape = {int(w.E),
                          static_cast<typename ProblemShape::UnderlyingProblemShape*>(
                              const_cast<void*>(call.problem_shapes)),
                          nullptr};
    auto& m = args.mainloop;
    m.ptr_A = static_cast<const Code**>(const_cast<void*>(w.code_ptrs));
    m.dA = static_cast<CodeLayoutArg*>(const_cast<void*>(w.code_layouts));
    m.ptr_B = reinterpret_cast<const Mma**>(const_cast<const void**>(call.act_rows));
    m.dB = static_cast<StrideAct*>(const_cast<void*>(w.act_strides));
    m.ptr_S = static_cast<const Mma**>(const_cast<void*>(w.scale_ptrs));
    m.dS = static_cast<const StrideScale*>(w.scale_strides);
    m.chunk_size = w.group_size;
    auto& e = args.epilogue;
    e.thread.alpha = 1.0f;
    e.thread.beta = 0.0f;
    e.ptr_C = nullptr;
    e.dC = nullptr;
    e.ptr_D = reinterpret_cast<Mma**>(const_cast<void**>(call.out_rows));
    e.dD = static_cast<StrideOut*>(const_cast<void*>(w.out_strides));
    args.hw_info.device_id = 0;
    args.hw_info.sm_count = call.sm_count;
    return args;
  }

  static void make_static_args(KernelWeight& w) {
    const int64_t E = w.E, N = w.N, K = w.K;
    std::vector<const void*> codes(E), scales(E);
    const size_t code_bytes = size_t(N * K * cutlass::sizeof_bits<Code>::value / 8);
    const size_t scale_bytes = size_t(N * (K / w.group_size) * sizeof(Mma));
    for (int64_t e = 0; e < E; ++e) {
      codes[e] = static_cast<const char*>(w.code_data) + e * code_bytes;
      scales[e] = w.scales.as<char>() + e * scale_bytes;
    }
    CodeLayoutArg layout;
    if constexpr (kMmaOrder)
      layout = code_layout<Mma>(int(N), int(K));
    else
      layout = cutlass::make_cute_packed_stride(StrideCodes{}, {int(N), int(K), 1});
    const StrideScale scale_stride =
        cutlass::make_cute_packed_stride(StrideScale{}, {int(N), int(K / w.group_size), 1});
    const StrideAct act_stride = cutlass::make_cute_packed_stride(StrideAct{}, {1, int(K), 1});
    const StrideOut out_stride = cutlass::make_cute_packed_stride(StrideOut{}, {int(N), 1, 1});

    ArgumentBlob blob{static_cast<size_t>(E)};
    const size_t at_codes = blob.add_array(codes.data());
    const size_t at_scales = blob.add_array(scales.data());
    const size_t at_layouts = blob.add_repeated(layout);
    const size_t at_scale_strides = blob.add_repeated(scale_stride);
    const size_t at_act_strides = blob.add_repeated(act_stride);
    const size_t at_out_strides = blob.add_repeated(out_stride);
    w.static_args = DeviceBuffer(blob.bytes().size());
    w.static_args.upload(blob.bytes().data(), blob.bytes().size());
    const char* base = w.static_args.as<char>();
    w.code_ptrs = base + at_codes;
    w.scale_ptrs = base + at_scales;
    w.code_layouts = base + at_layouts;
    w.scale_strides = base + at_scale_strides;
    w.act_strides = base + at_act_strides;
    w.out_strides = base + at_out_strides;
  }

  static size_t workspace_bytes(int groups, int sm_count) {
    KernelWeight none;
    none.E = groups;
    none.group_size = kTileK;
    GroupCall call;
    call.sm_count = sm_count;
    return Gemm::get_workspace_size(arguments(none, call));
  }

  static cudaError_t run(const KernelWeight& w, const GroupCall& call, cudaStream_t stream) {
    Gemm gemm;
    const auto args = arguments(w, call);
    if (gemm.initialize(args, call.workspace, stream) != cutlass::Status::kSuccess)
      return cudaErrorInvalidConfiguration;
    if (gemm.run(stream) != cutlass::Status::kSuccess) return cudaErrorLaunchFailure;
    return cudaGetLastError();
  }

  static constexpr GemmOps ops{make_static_args, workspace_bytes, run};
};

}  // namespace qmoe::cuda_wgmma
