// prepare() of both CUDA backends (the shared CudaBackend, src/backend/cuda_common/) refuses a
// host device and a router weight on the input with top-k > 1, naming the backend. Refused before
// any CUDA call, so this runs without a GPU.
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

}  // namespace
}  // namespace qmoe
