// MoE::forward_batched on cuda-mma: every live row against the float64 reference of its expert's
// MLP alone, the rows past each count untouched (support/batched_case.hpp); captured in a CUDA
// graph; a count outside 0..T_max clamped and reported at the next forward; bad inputs refused.
// Bounds: those of cuda_mma_matches_reference_test.cpp (1e-2 bf16, 2e-3 f16).
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include "cuda/gpu_test.hpp"
#include "cuda_mma/on_device.hpp"
#include "qmoe/moe.hpp"
#include "support/batched_case.hpp"
#include "support/expect_error.hpp"

namespace qmoe {
namespace {

using test::kGpu;
using test::OnDevice;

double bound_for(DType dtype) { return dtype == DType::bf16 ? 1e-2 : 2e-3; }

Buffer downloaded(const OnDevice& d, const Buffer& like) {
  Buffer host(like.dtype(), like.shape());
  d.memory.download(host.data(), size_t(host.nbytes()));
  return host;
}

class CudaMmaBatched : public ::testing::TestWithParam<test::BatchedParam> {};

TEST_P(CudaMmaBatched, EveryLiveRowIsItsExpertsMlpAndNoOtherRowIsWritten) {
  QMOE_REQUIRE_GPU();
  const DType dtype = std::get<0>(GetParam()).dtype;
  test::BatchedCase c = test::make_batched_case(test::batched_spec(GetParam(), dtype));
  const MoE moe(c.config, *c.experts, "cuda-mma", kGpu);
  OnDevice x(c.x), counts(c.counts), out(c.out);
  moe.forward_batched(x.view, counts.view, out.view);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  test::expect_matches_reference(c, downloaded(out, c.out), bound_for(dtype));
}

INSTANTIATE_TEST_SUITE_P(Matrix, CudaMmaBatched, test::batched_matrix(), test::batched_name);

// E = 8, T_max = 64, int4 g128 bf16: counts 64, 0, 33, 1, ... on the device.
test::BatchedCase graph_case() {
  return test::make_batched_case(
      test::batched_spec({test::kBatchedSchemes[0], 8, 64}, DType::bf16));
}

TEST(CudaMmaBatchedGraph, ReplaysFromACapturedGraph) {
  QMOE_REQUIRE_GPU();
  test::BatchedCase c = graph_case();
  const MoE moe(c.config, *c.experts, "cuda-mma", kGpu);
  OnDevice x(c.x), counts(c.counts), out(c.out);
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  moe.reserve(8 * 64, stream);  // E x T_max rows at top-1: at least as many tokens
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), cudaSuccess);
  moe.forward_batched(x.view, counts.view, out.view, stream);
  ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  test::expect_matches_reference(c, downloaded(out, c.out), bound_for(DType::bf16));
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
}

// A count of T_max + 1 runs as T_max (no row past the expert's block is written) and the next
// forward throws naming the expert and the count; the one after that runs.
TEST(CudaMmaBatchedInputs, ACountOutOfRangeIsClampedAndReported) {
  QMOE_REQUIRE_GPU();
  test::BatchedCase c = graph_case();
  const MoE moe(c.config, *c.experts, "cuda-mma", kGpu);
  c.counts.data_as<int32_t>()[1] = 65;  // expert 1's block is 64 rows; expert 2's follows
  OnDevice x(c.x), counts(c.counts), out(c.out);
  moe.forward_batched(x.view, counts.view, out.view);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  c.counts.data_as<int32_t>()[1] = 64;  // what it ran as
  test::expect_matches_reference(c, downloaded(out, c.out), bound_for(DType::bf16));
  test::expect_error([&] { moe.forward_batched(x.view, counts.view, out.view); },
                     "counts[1] = 65, which is not a row count");
  OnDevice fixed(c.counts);
  moe.forward_batched(x.view, fixed.view, out.view);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

TEST(CudaMmaBatchedInputs, HostTensorsAndF32AreRefused) {
  QMOE_REQUIRE_GPU();
  test::BatchedCase c = graph_case();
  const MoE moe(c.config, *c.experts, "cuda-mma", kGpu);
  OnDevice x(c.x), counts(c.counts), out(c.out);
  test::expect_error([&] { moe.forward_batched(x.view, c.counts.view(), out.view); },
                     "counts is on cpu but the MoE runs on cuda:0");
  test::expect_error([&] { moe.forward_batched(c.x.view(), counts.view, out.view); },
                     "x is on cpu");
  Buffer f32(DType::f32, {8, 64, 128});
  OnDevice x32(f32), out32(f32);
  test::expect_error([&] { moe.forward_batched(x32.view, counts.view, out32.view); },
                     "f32 activations are not supported");
}

}  // namespace
}  // namespace qmoe
