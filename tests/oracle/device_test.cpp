// Devices: the host CPU as queried, CUDA devices (none without a GPU, never a crash), and every
// hand-written form of --device.
#include <gtest/gtest.h>

#include "oracle/build_check.hpp"
#include "qmoe/device.hpp"
#include "support/expect_error.hpp"

namespace qmoe {
namespace {

using test::expect_error;

TEST(Device, HostCpuReportsItsArchitecture) {
  const DeviceDesc d = host_cpu();
  EXPECT_EQ(d.kind, DeviceKind::cpu);
  EXPECT_FALSE(d.described);
#if defined(__x86_64__)
  EXPECT_TRUE(d.has(CpuFeature::x86_64));
  // AVX-512 foundations come with AVX2 and FMA on every CPU that has them.
  if (d.has(CpuFeature::avx512f)) {
    EXPECT_TRUE(d.has(CpuFeature::avx2) && d.has(CpuFeature::fma));
  }
#else
  EXPECT_FALSE(d.has(CpuFeature::x86_64));
#endif
}

TEST(Device, CudaDevicesNeverThrow) {
  std::vector<DeviceDesc> devices;
  EXPECT_NO_THROW(devices = cuda_devices());
  for (const DeviceDesc& d : devices) {
    EXPECT_EQ(d.kind, DeviceKind::cuda);
    EXPECT_GE(d.compute_capability, 10);
  }
#ifndef QMOE_WITH_CUDA
  EXPECT_TRUE(devices.empty());
#endif
}

TEST(Device, ParsesGpuNamesAndArchitectures) {
  struct Case {
    const char* text;
    int cc;
  };
  for (const Case& c :
       {Case{"sm_80", 80}, Case{"sm_86", 86}, Case{"sm_90", 90}, Case{"sm_90a", 90},
        Case{"a100", 80}, Case{"h100", 90}, Case{"h200", 90}, Case{"sm_100", 100}}) {
    const DeviceDesc d = parse_device(c.text);
    EXPECT_EQ(d.kind, DeviceKind::cuda) << c.text;
    EXPECT_EQ(d.compute_capability, c.cc) << c.text;
    EXPECT_TRUE(d.described) << c.text;
  }
  EXPECT_EQ(parse_device("h200").multiprocessors, 132);
}

TEST(Device, ParsesCpuFeatureLists) {
  const DeviceDesc avx2 = parse_device("cpu:avx2,fma");
  EXPECT_TRUE(avx2.has(CpuFeature::x86_64));  // implied by any x86 extension
  EXPECT_TRUE(avx2.has(CpuFeature::avx2) && avx2.has(CpuFeature::fma));
  EXPECT_FALSE(avx2.has(CpuFeature::avx512f));
  EXPECT_TRUE(parse_device("cpu:generic").cpu_features.empty());
  EXPECT_EQ(parse_device("cpu").described, false);
}

TEST(Device, RejectsUnknownFormsListingTheAcceptedOnes) {
  expect_error([] { parse_device("tpu"); }, "unknown device 'tpu' (accepted: cpu, cpu:FEATURE");
  expect_error([] { parse_device("cpu:avx9"); }, "unknown CPU feature 'avx9'");
  expect_error([] { parse_device("sm_"); }, "unknown device 'sm_'");
  expect_error([] { parse_device("cuda:x"); }, "expected cuda:N");
  if (cuda_devices().empty()) {
    expect_error([] { parse_device("cuda"); },
                 "this machine shows no CUDA device; describe one instead");
  }
}

TEST(BuildCheck, CudaCodeRunsWhereTheArchitectureRulesSay) {
  const char* built = "80-real,90a-real";
  EXPECT_FALSE(missing_cuda_code(built, 80));
  EXPECT_FALSE(missing_cuda_code(built, 86));  // sm_80 machine code runs on 8.x, x >= 0
  EXPECT_FALSE(missing_cuda_code(built, 90));  // sm_90a code runs on exactly 9.0
  const auto blackwell = missing_cuda_code(built, 100);
  ASSERT_TRUE(blackwell);
  EXPECT_NE(blackwell->find("CMAKE_CUDA_ARCHITECTURES including 100"), std::string::npos);
  EXPECT_TRUE(missing_cuda_code(built, 75));
  EXPECT_TRUE(missing_cuda_code("90a-real", 100));  // arch-specific code is not forward compatible
  EXPECT_FALSE(missing_cuda_code("80", 100));       // PTX is JIT-compiled for newer devices
  EXPECT_TRUE(missing_cuda_code("80-real", 90));    // machine code only within a major version
  EXPECT_FALSE(missing_cuda_code("native", 75));    // decided by the compiler: trusted
  EXPECT_FALSE(missing_cuda_code("", 75));
}

}  // namespace
}  // namespace qmoe
