#pragma once
// cuda-wgmma's device code is built for sm_90a only (wgmma): its GPU tests need compute
// capability 9.0 exactly and skip, with the reason, elsewhere.
#include "cuda/device.hpp"
#include "cuda/gpu_test.hpp"

#define QMOE_REQUIRE_SM90()                                                                  \
  do {                                                                                       \
    QMOE_REQUIRE_GPU();                                                                      \
    if (const CudaDeviceInfo d = current_cuda_device(); d.sm_major * 10 + d.sm_minor != 90)  \
      GTEST_SKIP() << "needs an sm_90 GPU (Hopper) for wgmma, this one is sm_" << d.sm_major \
                   << d.sm_minor;                                                            \
  } while (0)
