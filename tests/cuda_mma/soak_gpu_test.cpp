// cuda-mma under load, on the GPU (skipped, with the reason, without one):
// - soak: random layers the oracle gives cuda-mma on this device, 10^4 forwards over random token
//   windows (M from 0 to 8) against the independent float64 reference (QMOE_TEST_SCALE scales);
// - 4 host threads, each on its own stream, running forwards on one shared MoE get exactly the
//   bits of a single thread, and repeated forwards give the same bits;
// - the routing-input contract under QMOE_CHECK_ROUTING=1: the host backends' errors, word for
//   word (src/route/routing_contract.hpp); without it no host sync is added;
// - the oracle accepts exactly what cuda-mma's prepare and forward run (reduced property test).
// Bounds as cuda_mma_matches_reference_test: bf16 1e-2, f16 2e-3 normalized.
#include <cuda_runtime_api.h>
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "backend/backend.hpp"
#include "cuda/gpu_test.hpp"
#include "cuda_mma/on_device.hpp"
#include "qmoe/error.hpp"
#include "qmoe/moe.hpp"
#include "qmoe/oracle.hpp"
#include "support/random_layer.hpp"
#include "support/test_scale.hpp"
#include "support/token_window.hpp"

namespace qmoe {
namespace {

using test::kGpu;
using test::OnDevice;

double bound_for(DType dtype) { return dtype == DType::bf16 ? 1e-2 : 2e-3; }

constexpr int64_t kTokens = 64, kForwardsPerLayer = 50;

class CudaMmaSoak : public testing::Test {
 protected:
  void SetUp() override { QMOE_REQUIRE_GPU(); }
};

struct Layer {
  test::CaseSpec spec;
  test::MoECase c;
};

Layer accepted_layer(std::mt19937_64& rng) {
  const DeviceDesc gpu = query_device(kGpu);
  for (;;) {
    test::CaseSpec spec = test::random_spec(rng);
    spec.M = kTokens;
    spec.act_dtype = rng() % 2 ? DType::bf16 : DType::f16;
    test::MoECase c = test::make_case(spec);
    c.config.activation_dtype = spec.act_dtype;
    if (!evaluate(describe(*c.experts, c.config), gpu, "cuda-mma").backend.empty())
      return {spec, std::move(c)};
  }
}

Buffer run(const MoE& moe, const test::MoECase& c, int64_t first, int64_t M,
           cudaStream_t stream = nullptr) {
  const DType dtype = c.hidden.dtype();
  OnDevice hidden(test::copy_rows(c.hidden, first, M));
  OnDevice logits(test::copy_rows(c.router_logits, first, M));
  OnDevice out = test::poisoned_output(dtype, M, c.config.hidden);
  moe.forward(hidden.view, logits.view, out.view, stream);
  if (cudaStreamSynchronize(stream) != cudaSuccess) throw Error("forward failed on the GPU");
  return test::download(out, dtype, M, c.config.hidden);
}

TEST_F(CudaMmaSoak, RandomForwardsMatchTheReference) {
  const int64_t forwards = test::scaled_count(10000);
  std::mt19937_64 rng(4049);
  int64_t empty = 0;
  for (int64_t done = 0; done < forwards;) {
    const Layer layer = accepted_layer(rng);
    const MoE moe(layer.c.config, *layer.c.experts, "cuda-mma", kGpu);
    for (int64_t f = 0; f < kForwardsPerLayer && done < forwards; ++f, ++done) {
      const int64_t M = int64_t(rng() % 9), first = int64_t(rng() % (kTokens - M + 1));
      SCOPED_TRACE(fmt::format("forward {}: tokens {}..{} of {}", done, first, first + M,
                               test::describe(layer.spec)));
      const Buffer out = run(moe, layer.c, first, M);
      empty += M == 0;
      if (M == 0) continue;
      ASSERT_LT(test::relative_error(out, test::copy_rows(layer.c.reference, first, M)),
                bound_for(layer.spec.act_dtype));
    }
  }
  EXPECT_GT(empty, 0);
}

TEST_F(CudaMmaSoak, ThreadsWithOwnStreamsGetTheSingleThreadBits) {
  const test::MoECase c = test::make_case({.E = 16,
                                           .H = 256,
                                           .I = 128,
                                           .M = kTokens,
                                           .top_k = 4,
                                           .scheme = test::scheme(4, 32, true),
                                           .bias = true,
                                           .act_dtype = DType::bf16,
                                           .seed = 9});
  const MoE moe(c.config, *c.experts, "cuda-mma", kGpu);
  constexpr int kThreads = 4;
  const int64_t steps = test::scaled_count(50);
  const auto window = [](int t, int64_t s) {
    const int64_t m = 1 + (t * 13 + s * 7) % 32;
    return std::pair{(t * 11 + s * 5) % (kTokens - m + 1), m};
  };
  std::vector<std::vector<Buffer>> expected(kThreads), got(kThreads);
  for (int t = 0; t < kThreads; ++t)
    for (int64_t s = 0; s < steps; ++s) {
      const auto [w, m] = window(t, s);
      expected[t].push_back(run(moe, c, w, m));
    }
  std::vector<std::string> errors(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      cudaStream_t stream = nullptr;
      cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
      try {
        for (int64_t s = 0; s < steps; ++s) {
          const auto [w, m] = window(t, s);
          got[t].push_back(run(moe, c, w, m, stream));
        }
      } catch (const std::exception& e) {
        errors[t] = e.what();
      }
      cudaStreamDestroy(stream);
    });
  }
  for (std::thread& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) {
    ASSERT_EQ(errors[t], "") << "thread " << t;
    for (int64_t s = 0; s < steps; ++s) {
      const auto [w, m] = window(t, s);
      ASSERT_EQ(std::memcmp(got[t][s].data(), expected[t][s].data(), size_t(got[t][s].nbytes())), 0)
          << "thread " << t << " step " << s;
      EXPECT_LT(test::relative_error(got[t][s], test::copy_rows(c.reference, w, m)),
                bound_for(DType::bf16));
    }
  }
}

// The oracle accepts a layer for cuda-mma on this GPU exactly when cuda-mma's own prepare and a
// forward succeed, and what it accepts matches the reference (the host property test's GPU half,
// reduced: f32 activations included, which only the oracle's dtype rule refuses up front).
TEST_F(CudaMmaSoak, OracleAndPrepareAgree) {
  const Backend* backend = find_backend("cuda-mma");
  ASSERT_NE(backend, nullptr);
  const DeviceDesc gpu = query_device(kGpu);
  const int64_t cases = test::scaled_count(300);
  std::mt19937_64 rng(77);
  for (int64_t i = 0; i < cases; ++i) {
    test::CaseSpec spec = test::random_spec(rng);
    spec.act_dtype = test::pick(rng, std::vector<DType>{DType::f32, DType::f16, DType::bf16});
    SCOPED_TRACE(fmt::format("case {}: {}", i, test::describe(spec)));
    test::MoECase c = test::make_case(spec);
    c.config.activation_dtype = spec.act_dtype;
    const Selection verdict = evaluate(describe(*c.experts, c.config), gpu, "cuda-mma");
    OnDevice hidden(c.hidden), logits(c.router_logits);
    OnDevice out = test::poisoned_output(spec.act_dtype, spec.M, spec.H);
    std::string refusal;
    try {
      auto prepared = backend->prepare(*c.experts, c.config, kGpu);
      backend->forward(*prepared, c.config, hidden.view, logits.view, out.view, nullptr);
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    } catch (const Error& e) {
      refusal = e.what();
    }
    ASSERT_EQ(!verdict.backend.empty(), refusal.empty())
        << "oracle: " << (verdict.backend.empty() ? verdict.error : "accepts")
        << "\ncuda-mma: " << (refusal.empty() ? "runs" : refusal);
    if (refusal.empty()) {
      EXPECT_LT(
          test::relative_error(test::download(out, spec.act_dtype, spec.M, spec.H), c.reference),
          bound_for(spec.act_dtype));
    }
  }
}

// QMOE_CHECK_ROUTING for the lifetime of the object.
class RoutingChecks {
 public:
  RoutingChecks() { setenv("QMOE_CHECK_ROUTING", "1", 1); }
  ~RoutingChecks() { unsetenv("QMOE_CHECK_ROUTING"); }
  RoutingChecks(const RoutingChecks&) = delete;
  RoutingChecks& operator=(const RoutingChecks&) = delete;
};

TEST_F(CudaMmaSoak, CheckingModeKeepsTheHostContract) {
  const test::MoECase c = test::make_case({.E = 5,
                                           .H = 64,
                                           .I = 64,
                                           .M = 3,
                                           .top_k = 2,
                                           .scheme = test::scheme(4, 32),
                                           .act_dtype = DType::bf16,
                                           .seed = 3});
  const MoE moe(c.config, *c.experts, "cuda-mma", kGpu);
  const auto routed_error = [&](std::vector<int32_t> ids, std::vector<float> weights) {
    Buffer id_buffer(DType::i32, {3, 2}), weight_buffer(DType::f32, {3, 2});
    std::copy(ids.begin(), ids.end(), id_buffer.data_as<int32_t>());
    std::copy(weights.begin(), weights.end(), weight_buffer.data_as<float>());
    OnDevice hidden(c.hidden), dev_ids(id_buffer), dev_weights(weight_buffer);
    OnDevice out = test::poisoned_output(DType::bf16, 3, 64);
    try {
      moe.forward_routed(hidden.view, dev_weights.view, dev_ids.view, out.view);
      cudaDeviceSynchronize();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  const std::vector<float> ok_weights{0.5f, 0.5f, 0.3f, 0.7f, 0.9f, 0.1f};
  const std::vector<int32_t> ok_ids{0, 1, 2, 3, 4, 0};
  // Default: no check, so no host sync; the kernels report the bad id and the next forward
  // throws it (routing_report_gpu_test.cpp).
  EXPECT_EQ(routed_error({0, 1, 2, 5, 4, 0}, ok_weights), "");
  EXPECT_NE(routed_error(ok_ids, ok_weights).find("topk_ids[1, 1] = 5, which is not an expert id"),
            std::string::npos);
  const RoutingChecks on;
  EXPECT_EQ(routed_error(ok_ids, ok_weights), "");
  EXPECT_NE(routed_error({0, 1, 2, 5, 4, 0}, ok_weights)
                .find("topk_ids[1, 1] = 5 is not an expert id (valid: 0..4, or -1"),
            std::string::npos);
  // kExpertNotHere (-1): a slot whose expert lives on another rank, dropped.
  EXPECT_EQ(routed_error({0, 1, 2, 3, -1, 0}, ok_weights), "");
  EXPECT_NE(routed_error({0, 1, 2, 3, -2, 0}, ok_weights)
                .find("topk_ids[2, 0] = -2 is not an expert id (valid: 0..4, or -1"),
            std::string::npos);
  EXPECT_NE(
      routed_error(ok_ids, {0.5f, NAN, 0.3f, 0.7f, 0.9f, 0.1f}).find("topk_weights[0, 1] is nan"),
      std::string::npos);
  Buffer logits = c.router_logits.clone();
  logits.data_as<float>()[7] = INFINITY;
  OnDevice hidden(c.hidden), dev_logits(logits);
  OnDevice out = test::poisoned_output(DType::bf16, 3, 64);
  try {
    moe.forward(hidden.view, dev_logits.view, out.view);
    ADD_FAILURE() << "an infinite logit was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("router_logits[1, 2] is inf"), std::string::npos)
        << e.what();
  }
}

TEST_F(CudaMmaSoak, HostTensorsAndNoTokens) {
  const test::MoECase c = test::make_case({.E = 4,
                                           .H = 64,
                                           .I = 64,
                                           .M = 2,
                                           .top_k = 2,
                                           .scheme = test::scheme(4, 32),
                                           .act_dtype = DType::bf16});
  const MoE moe(c.config, *c.experts, "cuda-mma", kGpu);
  Buffer out(DType::bf16, {2, 64});
  try {
    moe.forward(c.hidden.view(), c.router_logits.view(), out.view());
    ADD_FAILURE() << "host tensors accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("hidden is on cpu but the MoE runs on cuda:0"),
              std::string::npos)
        << e.what();
  }
  const Buffer none = run(moe, c, 0, 0);
  EXPECT_EQ(none.numel(), 0);
}

}  // namespace
}  // namespace qmoe
