// ShardedMoE with CUDA ranks: routing on the GPU, remote slots dropped by the rank's alignment,
// partial outputs summed by a communicator on the forward's stream.
//  - Simulated ranks sharing GPU 0 (local_communicators stage sums through the host), every plan
//    form, in both token forms.
//  - NCCL with a world of one on GPU 0: bit-identical to the unsharded layer (the same routing
//    kernel, the rank holds every expert, a one-rank sum is the identity), also replayed from a
//    CUDA graph.
//  - NCCL with one rank per visible GPU (one process, a thread per rank): skipped with fewer than
//    two GPUs.
// Truth: the independent float64 forward of the whole layer (random_moe.hpp). bf16 activations:
// the layer's bound is 1e-2 (as for the unsharded cuda-mma tests); each rank's partial output is
// rounded to bf16 before the sum, which adds about 2^-9 of relative error, so sharded outputs get
// 1.5e-2. A dropped slot that still counted, a rank left out or a bias added twice is off by far
// more (the CPU suite shows the same plans failing at 1e-2 when broken).
#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <vector>

#include "cuda/gpu_test.hpp"
#include "cuda_mma/on_device.hpp"
#include "qmoe/distributed.hpp"
#include "support/moe_case.hpp"
#include "support/on_every_rank.hpp"

namespace qmoe {
namespace {

using test::on_every_rank;

using test::kGpu;
using test::OnDevice;

constexpr double kShardedBound = 1.5e-2;

// Ranks sharing a GPU need a stream each: a stream's scratch serves one forward at a time.
class OwnStream {
 public:
  OwnStream() { QMOE_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking)); }
  ~OwnStream() { cudaStreamDestroy(stream_); }
  OwnStream(const OwnStream&) = delete;
  OwnStream& operator=(const OwnStream&) = delete;
  cudaStream_t get() const { return stream_; }

 private:
  cudaStream_t stream_ = nullptr;
};

struct Case {
  const char* name;
  test::CaseSpec spec;
  ShardSpec shards;
};
void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

test::CaseSpec bf16_case(test::CaseSpec spec) {
  spec.act_dtype = DType::bf16;
  return spec;
}

class CudaRanksMatchTheReference : public testing::TestWithParam<Case> {};

TEST_P(CudaRanksMatchTheReference, TokensReplicatedOnSimulatedRanks) {
  QMOE_REQUIRE_GPU();
  const Case& c = GetParam();
  const test::MoECase x = test::make_case(bf16_case(c.spec));
  const ShardPlan plan = plan_shards(describe(*x.experts, x.config), c.shards);
  const int world = plan.world_size();
  const auto comms = local_communicators(world);
  const OnDevice hidden(x.hidden), logits(x.router_logits);
  std::vector<OnDevice> outs;
  for (int r = 0; r < world; ++r)
    outs.push_back(test::poisoned_output(DType::bf16, c.spec.M, c.spec.H));
  on_every_rank(world, [&](int r) {
    const ShardedMoE rank(x.config, *x.experts, plan, *comms[size_t(r)], "auto", kGpu);
    const OwnStream stream;
    // Twice: a slot the rank dropped must not be reported as bad routing at the next forward.
    for (int i = 0; i < 2; ++i)
      rank.forward(hidden.view, logits.view, outs[size_t(r)].view, stream.get());
    QMOE_CUDA_CHECK(cudaStreamSynchronize(stream.get()));
  });
  for (int r = 0; r < world; ++r) {
    const Buffer got = test::download(outs[size_t(r)], DType::bf16, c.spec.M, c.spec.H);
    EXPECT_LT(test::relative_error(got, x.reference), kShardedBound) << "rank " << r;
  }
}

TEST_P(CudaRanksMatchTheReference, TokensSplitOnSimulatedRanks) {
  QMOE_REQUIRE_GPU();
  const Case& c = GetParam();
  const int world = c.shards.tp_size * c.shards.ep_size;
  test::CaseSpec spec = bf16_case(c.spec);
  spec.M *= world;  // rank r holds rows [r n, (r + 1) n)
  const test::MoECase x = test::make_case(spec);
  const ShardPlan plan = plan_shards(describe(*x.experts, x.config), c.shards);
  const auto comms = local_communicators(world);
  const int64_t n = c.spec.M, H = spec.H, E = spec.E;
  const OnDevice hidden(x.hidden), logits(x.router_logits);
  OnDevice out = test::poisoned_output(DType::bf16, spec.M, H);
  on_every_rank(world, [&](int r) {
    const ShardedMoE rank(x.config, *x.experts, plan, *comms[size_t(r)], "auto", kGpu);
    const TensorView mine_hidden(hidden.view.data_as<bf16_t>() + r * n * H, DType::bf16, {n, H},
                                 kGpu);
    const TensorView mine_logits(logits.view.data_as<float>() + r * n * E, DType::f32, {n, E},
                                 kGpu);
    const TensorView mine_out(out.view.data_as<bf16_t>() + r * n * H, DType::bf16, {n, H}, kGpu);
    const OwnStream stream;
    rank.forward_token_split(mine_hidden, mine_logits, mine_out, stream.get());
    QMOE_CUDA_CHECK(cudaStreamSynchronize(stream.get()));
  });
  EXPECT_LT(test::relative_error(test::download(out, DType::bf16, spec.M, H), x.reference),
            kShardedBound);
}

INSTANTIATE_TEST_SUITE_P(
    Plans, CudaRanksMatchTheReference,
    testing::Values(
        Case{"tp2_int4_g128",
             {.E = 8, .H = 256, .I = 256, .M = 7, .scheme = test::scheme(4, 128)},
             ShardSpec{.tp_size = 2}},
        Case{"ep2_odd_experts_asym_bias",
             {.E = 7,
              .H = 256,
              .I = 128,
              .M = 33,
              .top_k = 2,
              .scheme = test::scheme(4, 64, true),
              .bias = true},
             ShardSpec{.ep_size = 2}},
        Case{"tp2_ep2_int8_act_order",
             {.E = 6, .H = 128, .I = 256, .M = 5, .scheme = test::scheme(8, 64, false, true)},
             ShardSpec{.tp_size = 2, .ep_size = 2}},
        Case{"ep4_rank_without_tokens",
             {.E = 8, .H = 128, .I = 128, .M = 1, .top_k = 1, .scheme = test::scheme(4, 32)},
             ShardSpec{.ep_size = 4}},
        Case{"ep2_prefill",
             {.E = 16, .H = 256, .I = 128, .M = 300, .top_k = 4, .scheme = test::scheme(4, 128)},
             ShardSpec{.ep_size = 2}}),
    [](const auto& p) { return std::string(p.param.name); });

// One NCCL rank holding the whole layer gives exactly the unsharded layer's output.
TEST(NcclWorldOfOne, EqualsTheUnshardedLayerAlsoFromAGraph) {
  QMOE_REQUIRE_GPU();
  if (!nccl_built()) GTEST_SKIP() << nccl_status();
  const test::CaseSpec spec =
      bf16_case({.E = 8, .H = 256, .I = 128, .M = 9, .top_k = 2, .scheme = test::scheme(4, 128)});
  const test::MoECase x = test::make_case(spec);
  const OnDevice hidden(x.hidden), logits(x.router_logits);
  const MoE whole(x.config, *x.experts, "auto", kGpu);
  OnDevice want = test::poisoned_output(DType::bf16, spec.M, spec.H);
  whole.forward(hidden.view, logits.view, want.view);

  const int devices[] = {0};
  const auto comms = nccl_communicators(devices);
  const ShardPlan plan = plan_shards(describe(*x.experts, x.config), ShardSpec{});
  const ShardedMoE rank(x.config, *x.experts, plan, *comms[0], "auto", kGpu);
  const OwnStream own;
  const cudaStream_t stream = own.get();
  rank.reserve(spec.M, stream);
  OnDevice got = test::poisoned_output(DType::bf16, spec.M, spec.H);
  rank.forward(hidden.view, logits.view, got.view, stream);
  QMOE_CUDA_CHECK(cudaStreamSynchronize(stream));
  const Buffer a = test::download(want, DType::bf16, spec.M, spec.H);
  const Buffer b = test::download(got, DType::bf16, spec.M, spec.H);
  EXPECT_EQ(std::memcmp(a.data(), b.data(), size_t(a.nbytes())), 0);
  EXPECT_LT(test::relative_error(b, x.reference), 1e-2);

  OnDevice replayed = test::poisoned_output(DType::bf16, spec.M, spec.H);
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  QMOE_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  rank.forward(hidden.view, logits.view, replayed.view, stream);
  QMOE_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
  QMOE_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  QMOE_CUDA_CHECK(cudaGraphLaunch(exec, stream));
  QMOE_CUDA_CHECK(cudaStreamSynchronize(stream));
  const Buffer c = test::download(replayed, DType::bf16, spec.M, spec.H);
  EXPECT_EQ(std::memcmp(a.data(), c.data(), size_t(a.nbytes())), 0);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
}

// Every visible GPU one NCCL rank, TP and EP across them, both token forms.
TEST(NcclAcrossGpus, EveryPlanMatchesTheReference) {
  QMOE_REQUIRE_GPU();
  if (!nccl_built()) GTEST_SKIP() << nccl_status();
  int gpus = 0;
  QMOE_CUDA_CHECK(cudaGetDeviceCount(&gpus));
  if (gpus < 2) GTEST_SKIP() << "needs two GPUs, this machine has " << gpus;
  const int world = 2;
  std::vector<int> devices{0, 1};
  for (const ShardSpec shards : {ShardSpec{.tp_size = 2}, ShardSpec{.ep_size = 2}}) {
    SCOPED_TRACE(testing::Message() << "tp " << shards.tp_size << " ep " << shards.ep_size);
    const int64_t n = 6;
    const test::CaseSpec spec = bf16_case({.E = 9,
                                           .H = 256,
                                           .I = 256,
                                           .M = n * world,
                                           .top_k = 3,
                                           .scheme = test::scheme(4, 128, true),
                                           .bias = true});
    const test::MoECase x = test::make_case(spec);
    const ShardPlan plan = plan_shards(describe(*x.experts, x.config), shards);
    const auto comms = nccl_communicators(devices);
    std::vector<Buffer> replicated(world), split(world);
    on_every_rank(world, [&](int r) {
      const Device gpu{DeviceKind::cuda, r};
      QMOE_CUDA_CHECK(cudaSetDevice(r));
      auto on_gpu = [&](const Buffer& host) {
        DeviceBuffer d(size_t(host.nbytes()));
        d.upload(host.data(), d.bytes());
        return d;
      };
      const DeviceBuffer hidden = on_gpu(x.hidden), logits = on_gpu(x.router_logits);
      DeviceBuffer out(size_t(spec.M * spec.H * 2)), mine(size_t(n * spec.H * 2));
      const ShardedMoE rank(x.config, *x.experts, plan, *comms[size_t(r)], "auto", gpu);
      rank.forward(TensorView(hidden.data(), DType::bf16, {spec.M, spec.H}, gpu),
                   TensorView(logits.data(), DType::f32, {spec.M, spec.E}, gpu),
                   TensorView(out.data(), DType::bf16, {spec.M, spec.H}, gpu));
      rank.forward_token_split(
          TensorView(hidden.as<bf16_t>() + r * n * spec.H, DType::bf16, {n, spec.H}, gpu),
          TensorView(logits.as<float>() + r * n * spec.E, DType::f32, {n, spec.E}, gpu),
          TensorView(mine.data(), DType::bf16, {n, spec.H}, gpu));
      QMOE_CUDA_CHECK(cudaDeviceSynchronize());
      replicated[size_t(r)] = Buffer(DType::bf16, {spec.M, spec.H});
      out.download(replicated[size_t(r)].data(), out.bytes());
      split[size_t(r)] = Buffer(DType::bf16, {n, spec.H});
      mine.download(split[size_t(r)].data(), mine.bytes());
    });
    Buffer joined(DType::bf16, {spec.M, spec.H});
    for (int r = 0; r < world; ++r) {
      EXPECT_LT(test::relative_error(replicated[size_t(r)], x.reference), kShardedBound)
          << "rank " << r;
      std::memcpy(joined.data_as<bf16_t>() + r * n * spec.H, split[size_t(r)].data(),
                  size_t(split[size_t(r)].nbytes()));
    }
    EXPECT_LT(test::relative_error(joined, x.reference), kShardedBound);
  }
}

}  // namespace
}  // namespace qmoe
