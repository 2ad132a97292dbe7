// Bad routing on the GPU is never silent, on both CUDA backends: with the checking mode off (no
// host sync per forward), an expert id outside 0..E-1 (forward_routed) or non-finite logits
// (forward) are reported by the kernels, and the layer's next forward, after the caller has
// synchronised, throws an Error naming the token, the slot and the id or weight. Once: the
// forward after that runs.
#include <cuda_runtime_api.h>
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "backend/backend.hpp"
#include "cuda/gpu_test.hpp"
#include "cuda_mma/on_device.hpp"
#include "qmoe/error.hpp"
#include "qmoe/moe.hpp"
#include "qmoe/oracle.hpp"
#include "support/moe_case.hpp"

namespace qmoe {
namespace {

using test::kGpu;
using test::OnDevice;

// The backends of this build that run on this GPU (cuda-wgmma's code is for sm_90a only).
std::vector<std::string> gpu_backends() {
  std::vector<std::string> names;
  if (find_backend("cuda-mma")) names.emplace_back("cuda-mma");
  if (find_backend("cuda-wgmma") && query_device(kGpu).compute_capability == 90)
    names.emplace_back("cuda-wgmma");
  return names;
}

// The error of `run` followed by a device synchronisation, "" when there is none.
template <class Run>
std::string error_of(Run run) {
  try {
    run();
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// M = 3, 40 and 2500 tokens of top-2: the alignment's one-warp, one-block and many-block paths.
TEST(CudaRoutingReport, BadIdsAndNonFiniteWeightsSurfaceAtTheNextForward) {
  QMOE_REQUIRE_GPU();
  for (const std::string& backend : gpu_backends()) {
    for (const int64_t M : {3, 40, 2500}) {
      SCOPED_TRACE(backend + ", M = " + std::to_string(M));
      test::MoECase c = test::make_case({.E = 5,
                                         .H = 128,
                                         .I = 64,
                                         .M = M,
                                         .top_k = 2,
                                         .scheme = test::scheme(4, 64),
                                         .act_dtype = DType::bf16,
                                         .seed = 5});
      c.config.activation_dtype = DType::bf16;
      const MoE moe(c.config, *c.experts, backend, kGpu);
      OnDevice hidden(c.hidden), logits(c.router_logits);
      OnDevice out = test::poisoned_output(DType::bf16, M, 128);
      // Valid ids, but `bad` in the last token's second slot when given.
      const auto routed = [&](std::optional<int32_t> bad) {
        Buffer ids(DType::i32, {M, 2}), weights(DType::f32, {M, 2});
        for (int64_t i = 0; i < 2 * M; ++i) {
          ids.data_as<int32_t>()[i] = int32_t(i % 5);
          weights.data_as<float>()[i] = 0.5f;
        }
        if (bad) ids.data_as<int32_t>()[2 * M - 1] = *bad;
        OnDevice dev_ids(ids), dev_weights(weights);
        return error_of(
            [&] { moe.forward_routed(hidden.view, dev_weights.view, dev_ids.view, out.view); });
      };
      ASSERT_EQ(routed(std::nullopt), "");
      // The bad forward itself runs without a host sync; the next one reports it.
      EXPECT_EQ(routed(5), "");
      EXPECT_EQ(routed(std::nullopt),
                fmt::format("{}: an earlier forward's routing had topk_ids[{}, 1] = 5, which is "
                            "not an expert id (valid: 0..4); that token's output lacks the slot",
                            backend, M - 1));
      EXPECT_EQ(routed(std::nullopt), "") << "reported once";
      EXPECT_EQ(routed(-7), "");
      EXPECT_NE(routed(std::nullopt)
                    .find(fmt::format("topk_ids[{}, 1] = -7, which is not an expert id", M - 1)),
                std::string::npos);

      // A NaN logit makes its token's weights NaN in the device routing.
      Buffer nan_logits = c.router_logits.clone();
      nan_logits.data_as<float>()[(M - 1) * 5 + 3] = NAN;
      OnDevice bad_logits(nan_logits);
      EXPECT_EQ(error_of([&] { moe.forward(hidden.view, bad_logits.view, out.view); }), "");
      const std::string reported =
          error_of([&] { moe.forward(hidden.view, logits.view, out.view); });
      EXPECT_NE(reported.find(fmt::format("{}: an earlier forward's routing had topk_weights[{}, ",
                                          backend, M - 1)),
                std::string::npos)
          << reported;
      EXPECT_NE(reported.find("] = nan (valid: a finite weight"), std::string::npos) << reported;
      EXPECT_EQ(error_of([&] { moe.forward(hidden.view, logits.view, out.view); }), "");
    }
  }
}

}  // namespace
}  // namespace qmoe
