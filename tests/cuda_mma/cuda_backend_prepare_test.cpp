// prepare() of both CUDA backends (the shared CudaBackend, src/backend/cuda_common/) refuses a
// host device, a router weight on the input with top-k > 1 (naming the backend) and experts that
// disagree with the config. Refused before any CUDA call, so this runs without a GPU.
#include <gtest/gtest.h>

#include "backend/backend.hpp"
#include "support/expect_error.hpp"
#include "support/moe_case.hpp"

namespace qmoe {
namespace {

TEST(CudaBackendPrepare, RefusesHostDevicesAndWeightOnInputAboveTopOne) {
  test::MoECase c = test::make_case(
      {.E = 4, .H = 128, .I = 128, .M = 2, .top_k = 2, .scheme = test::scheme(4, 64)});
  int checked = 0;
  for (const char* name : {"cuda-mma", "cuda-wgmma"}) {
    const Backend* backend = find_backend(name);
    if (!backend) continue;  // cuda-wgmma is not in builds without CUTLASS
    ++checked;
    test::expect_error(
        [&] {
          backend->prepare(*c.experts, c.config, Device{DeviceKind::cpu, 0});
        },
        std::string("backend '") + name + "' runs on a CUDA device, not on cpu");
    MoEConfig on_input = c.config;
    on_input.apply_router_weight_on_input = true;
    test::expect_error(
        [&] {
          backend->prepare(*c.experts, on_input, Device{DeviceKind::cuda, 0});
        },
        std::string(name) + ": apply_router_weight_on_input needs top_k 1, got 2");
  }
  EXPECT_GE(checked, 1);
}

// The kernels size and order w13's rows by the config (cuda-mma) or by the weights (cuda-wgmma):
// a gated activation over w13 of I rows would read past GEMM1's rows, so both refuse it, on the
// host half of prepare too.
TEST(CudaBackendPrepare, RefusesExpertsThatDisagreeWithTheConfig) {
  test::MoECase c = test::make_case(
      {.E = 4, .H = 128, .I = 128, .M = 2, .top_k = 2, .scheme = test::scheme(4, 64)});
  MoEConfig not_gated = c.config;
  not_gated.activation = Activation::relu2_no_mul;
  MoEConfig with_bias = c.config;
  with_bias.w2_bias = true;
  int checked = 0;
  for (const char* name : {"cuda-mma", "cuda-wgmma"}) {
    const Backend* backend = find_backend(name);
    if (!backend) continue;
    ++checked;
    test::expect_error([&] { backend->prepare_on_host(*c.experts, not_gated); },
                       "activation relu2_no_mul is not gated but w13 has 256 rows for I = 128");
    test::expect_error(
        [&] {
          backend->prepare(*c.experts, with_bias, Device{DeviceKind::cuda, 0});
        },
        "bias flags (w13 false, w2 true) disagree with the experts (w13 false, w2 false)");
  }
  EXPECT_GE(checked, 1);
}

}  // namespace
}  // namespace qmoe
