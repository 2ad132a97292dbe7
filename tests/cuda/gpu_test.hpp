#pragma once
// Helpers for GPU tests: skip without a device, move vectors to and from device buffers, poison
// outputs so unwritten elements show.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "cuda/cuda_check.hpp"
#include "cuda/device.hpp"
#include "cuda/device_buffer.hpp"
#include "qmoe/error.hpp"

// Skips the test, with the reason, on machines without a usable CUDA device (CI).
#define QMOE_REQUIRE_GPU()                                                       \
  do {                                                                           \
    if (const std::string why = ::qmoe::cuda_unavailable_reason(); !why.empty()) \
      GTEST_SKIP() << "needs a CUDA GPU: " << why;                               \
  } while (0)

namespace qmoe::test {

template <class T>
DeviceBuffer to_device(const std::vector<T>& host) {
  DeviceBuffer d(host.size() * sizeof(T));
  if (!host.empty()) d.upload(host.data(), host.size() * sizeof(T));
  return d;
}

template <class T>
std::vector<T> to_host(const DeviceBuffer& d, size_t count) {
  std::vector<T> host(count);
  if (count) d.download(host.data(), count * sizeof(T));
  return host;
}

// 0xff bytes: NaN for f32/f16/bf16, -1 for integers.
inline DeviceBuffer poisoned(size_t bytes, int byte = 0xff) {
  DeviceBuffer d(bytes);
  if (bytes) QMOE_CUDA_CHECK(cudaMemset(d.data(), byte, bytes));
  return d;
}

}  // namespace qmoe::test
