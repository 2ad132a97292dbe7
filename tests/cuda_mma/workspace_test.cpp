// The CUDA workspace contract (cuda_common/workspace_sizes.hpp and workspace_pool.hpp), with
// cuda-mma's sizes (cuda_mma/workspace_need.hpp) and MoE::reserve.
// Host part (runs in CI without a GPU): the sizes hold what the alignment of every smaller batch
// writes, as align.hpp states it; one workspace serves layers of different shapes; growth during a
// capture is an Error naming MoE::reserve. GPU part: a graph captured at one token still replays
// correctly after a much larger eager forward on its stream, with the memory the graph used
// given back and poisoned if it had been freed; growth during a real capture throws; layers share
// one workspace per stream.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "backend/cuda_common/workspace_pool.hpp"
#include "backend/cuda_common/workspace_sizes.hpp"
#include "backend/cuda_mma/expert_gemm.hpp"
#include "backend/cuda_mma/workspace_need.hpp"
#include "cuda/align.hpp"
#include "cuda/device_buffer.hpp"
#include "cuda/gpu_test.hpp"
#include "cuda_mma/on_device.hpp"
#include "qmoe/error.hpp"
#include "qmoe/moe.hpp"
#include "support/moe_case.hpp"

namespace qmoe::cuda_mma {
namespace {

using cuda_common::covering;
using cuda_common::grown_sizes;
using cuda_common::WorkspacePool;
using cuda_common::WorkspaceSizes;

// align.hpp: a batch of P pairs over E experts at tiles of T rows sorts into at most
// P + min(E, P) * (T - 1) rows, i.e. (that) / T tiles.
int64_t padded_rows(int64_t pairs, int64_t E, int tile) {
  return pairs + std::min(E, pairs) * (tile - 1);
}

TEST(WorkspaceSizes, HoldEveryBatchUpToTheReservedOne) {
  struct Layer {
    int64_t E, H, I;
    int top_k;
  };
  for (const Layer& l : {Layer{8, 256, 512, 2}, Layer{60, 2048, 1408, 4}, Layer{128, 2048, 768, 8},
                         Layer{256, 7168, 2048, 8}}) {
    for (int64_t M : {1, 3, 64, 300, 1024}) {
      const WorkspaceSizes s = workspace_sizes(M, l.top_k, l.E, l.H, l.I);
      for (int64_t m = 1; m <= M; ++m) {
        const int64_t pairs = m * l.top_k;
        const int tile = choose_tile_rows(m, l.top_k, l.E);
        const auto rows = size_t(padded_rows(pairs, l.E, tile));
        ASSERT_GE(s.sorted_pair_ids, rows * 4) << "E " << l.E << " M " << M << " m " << m;
        ASSERT_GE(s.tile_experts, rows / size_t(tile) * 4);
        ASSERT_GE(s.activated, rows * size_t(l.I) * 2);
        ASSERT_GE(s.gemm2_out, rows * size_t(l.H) * 2);
        ASSERT_GE(s.topk_ids, size_t(pairs) * 4);
        ASSERT_GE(s.pair_rows, size_t(pairs) * 4);
        ASSERT_GE(s.align_scratch, align_sizes(pairs, l.E, tile).workspace_bytes);
        ASSERT_TRUE(tile < kMinSharedTileRows || s.tail_flags > 0) << "m " << m;
      }
    }
  }
}

TEST(WorkspaceSizes, OneWorkspaceServesLayersOfDifferentShapes) {
  const WorkspaceSizes wide = workspace_sizes(16, 8, 256, 7168, 2048);
  const WorkspaceSizes many = workspace_sizes(512, 2, 8, 1024, 4096);
  const WorkspaceSizes both = covering(wide, many);
  EXPECT_TRUE(both.holds(wide));
  EXPECT_TRUE(both.holds(many));
  EXPECT_FALSE(wide.holds(many));
  EXPECT_FALSE(many.holds(wide));
  EXPECT_LE(both.total(), wide.total() + many.total());
  EXPECT_EQ(both.tokens, 512);
}

TEST(WorkspaceSizes, GrowthOnlyOutsideACapture) {
  const WorkspaceSizes small = workspace_sizes(1, 8, 128, 2048, 768);
  const WorkspaceSizes large = workspace_sizes(4096, 8, 128, 2048, 768);
  EXPECT_EQ(grown_sizes(large, small, true, "s"), large);  // holds it: nothing to allocate
  EXPECT_EQ(grown_sizes(small, large, false, "s"), covering(small, large));
  try {
    grown_sizes(small, large, true, "stream 0x1234 of cuda:0");
    FAIL() << "growth during a capture must throw";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("MoE::reserve"), std::string::npos) << what;
    EXPECT_NE(what.find("4096 tokens"), std::string::npos) << what;
    EXPECT_NE(what.find("stream 0x1234 of cuda:0"), std::string::npos) << what;
  }
  EXPECT_THROW(workspace_sizes(0, 8, 128, 2048, 768), Error);
}

// ---- On a GPU ----

using test::download;
using test::kGpu;
using test::OnDevice;
using test::poisoned_output;

class WorkspaceOnGpu : public testing::Test {
 protected:
  void SetUp() override {
    QMOE_REQUIRE_GPU();
    ASSERT_EQ(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), cudaSuccess);
  }
  void TearDown() override {
    if (stream_) cudaStreamDestroy(stream_);
  }
  cudaStream_t stream_ = nullptr;
};

// Bound as in cuda_mma_matches_reference_test.cpp (bf16: four roundings, 1e-2).
constexpr double kBf16Bound = 1e-2;

// The pattern engines use: decode graphs captured at small batches, prefill run eagerly on the
// same stream at a large one. The graph must still replay correctly afterwards.
TEST_F(WorkspaceOnGpu, GraphReplaysCorrectlyAfterALargerEagerForward) {
  const test::CaseSpec one{.E = 16,
                           .H = 256,
                           .I = 384,
                           .M = 1,
                           .top_k = 4,
                           .scheme = test::scheme(4, 128),
                           .act_dtype = DType::bf16,
                           .seed = 41};
  test::CaseSpec big = one;
  big.M = 4096;
  const test::MoECase small_case = test::make_case(one);
  const test::MoECase big_case = test::make_case(big);  // same seed and shape: same weights
  MoE moe(small_case.config, *small_case.experts, "cuda-mma", kGpu);
  moe.reserve(1, stream_);
  OnDevice hidden(small_case.hidden), logits(small_case.router_logits);
  OnDevice out = poisoned_output(DType::bf16, 1, one.H);
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  moe.forward(hidden.view, logits.view, out.view, stream_);
  ASSERT_EQ(cudaStreamEndCapture(stream_, &graph), cudaSuccess);
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);

  // Eager prefill: the stream's workspace grows. Then take as much device memory as the graph's
  // workspace had and poison it, so that a graph pointing into freed memory reads garbage.
  OnDevice big_hidden(big_case.hidden), big_logits(big_case.router_logits);
  OnDevice big_out = poisoned_output(DType::bf16, big.M, big.H);
  moe.forward(big_hidden.view, big_logits.view, big_out.view, stream_);
  ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
  const size_t graph_bytes = workspace_sizes(1, one.top_k, one.E, one.H, one.I).total();
  std::vector<DeviceBuffer> takers;
  for (int i = 0; i < 16; ++i) takers.push_back(test::poisoned(graph_bytes));
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);

  ASSERT_EQ(cudaGraphLaunch(exec, stream_), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
  EXPECT_LT(test::relative_error(download(out, DType::bf16, 1, one.H), small_case.reference),
            kBf16Bound);
  // A graph writing into memory freed under it would have written into these.
  for (const DeviceBuffer& taker : takers) {
    const std::vector<uint8_t> bytes = test::to_host<uint8_t>(taker, taker.bytes());
    ASSERT_TRUE(std::all_of(bytes.begin(), bytes.end(), [](uint8_t b) { return b == 0xff; }))
        << "the replay wrote into memory allocated after the eager forward";
  }
  EXPECT_LT(test::relative_error(download(big_out, DType::bf16, big.M, big.H), big_case.reference),
            kBf16Bound);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
}

TEST_F(WorkspaceOnGpu, GrowthDuringCaptureNamesReserve) {
  const test::CaseSpec spec{.E = 8,
                            .H = 128,
                            .I = 256,
                            .M = 64,
                            .top_k = 2,
                            .scheme = test::scheme(4, 64),
                            .act_dtype = DType::bf16,
                            .seed = 43};
  const test::MoECase c = test::make_case(spec);
  MoE moe(c.config, *c.experts, "cuda-mma", kGpu);
  moe.reserve(8, stream_);
  OnDevice hidden(c.hidden), logits(c.router_logits);
  OnDevice out = poisoned_output(DType::bf16, spec.M, spec.H);
  ASSERT_EQ(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  std::string message;
  try {
    moe.forward(hidden.view, logits.view, out.view, stream_);
  } catch (const Error& e) {
    message = e.what();
  }
  cudaGraph_t graph = nullptr;
  cudaStreamEndCapture(stream_, &graph);
  if (graph) cudaGraphDestroy(graph);
  EXPECT_NE(message.find("MoE::reserve"), std::string::npos) << "message: " << message;
  // After reserving, the same capture works and replays correctly.
  moe.reserve(spec.M, stream_);
  ASSERT_EQ(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  moe.forward(hidden.view, logits.view, out.view, stream_);
  ASSERT_EQ(cudaStreamEndCapture(stream_, &graph), cudaSuccess);
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(exec, stream_), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
  EXPECT_LT(test::relative_error(download(out, DType::bf16, spec.M, spec.H), c.reference),
            kBf16Bound);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
}

TEST_F(WorkspaceOnGpu, LayersShareOneWorkspacePerStream) {
  const test::MoECase a = test::make_case({.E = 16,
                                           .H = 512,
                                           .I = 256,
                                           .M = 2,
                                           .top_k = 2,
                                           .scheme = test::scheme(4, 128),
                                           .act_dtype = DType::bf16,
                                           .seed = 45});
  const test::MoECase b = test::make_case({.E = 32,
                                           .H = 256,
                                           .I = 512,
                                           .M = 2,
                                           .top_k = 4,
                                           .scheme = test::scheme(8, 128),
                                           .act_dtype = DType::bf16,
                                           .seed = 46});
  MoE first(a.config, *a.experts, "cuda-mma", kGpu), second(b.config, *b.experts, "cuda-mma", kGpu);
  first.reserve(100, stream_);
  second.reserve(40, stream_);
  const WorkspaceSizes expected =
      covering(workspace_sizes(100, 2, 16, 512, 256), workspace_sizes(40, 4, 32, 256, 512));
  EXPECT_EQ(WorkspacePool::for_device(0)->current_bytes(stream_), expected.total());
  // Both layers run on the shared workspace, one after the other.
  for (const test::MoECase* c : {&a, &b}) {
    const MoE& moe = c == &a ? first : second;
    OnDevice hidden(c->hidden), logits(c->router_logits);
    OnDevice out = poisoned_output(DType::bf16, 2, c->config.hidden);
    moe.forward(hidden.view, logits.view, out.view, stream_);
    ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
    EXPECT_LT(test::relative_error(download(out, DType::bf16, 2, c->config.hidden), c->reference),
              kBf16Bound);
  }
  EXPECT_EQ(WorkspacePool::for_device(0)->current_bytes(stream_), expected.total());
}

}  // namespace
}  // namespace qmoe::cuda_mma
