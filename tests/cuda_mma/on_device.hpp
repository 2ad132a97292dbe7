#pragma once
// Host buffers of a test case on GPU 0, and outputs back, for the cuda-mma tests.
#include <cstring>

#include "cuda/device_buffer.hpp"
#include "qmoe/tensor.hpp"

namespace qmoe::test {

inline constexpr Device kGpu{DeviceKind::cuda, 0};

// A host buffer's bytes on the GPU, viewed with the same shape.
struct OnDevice {
  DeviceBuffer memory;
  TensorView view;
  explicit OnDevice(const Buffer& host) : memory(size_t(host.nbytes())) {
    if (host.nbytes() > 0) memory.upload(host.data(), memory.bytes());
    view = TensorView(memory.data(), host.dtype(), host.shape(), kGpu);
  }
};

inline Buffer download(const OnDevice& d, DType dtype, int64_t rows, int64_t cols) {
  Buffer host(dtype, {rows, cols});
  if (host.nbytes() > 0) d.memory.download(host.data(), size_t(host.nbytes()));
  return host;
}

// Poisoned output (all bits set: NaN in bf16 and f16) so an unwritten element fails the check.
inline OnDevice poisoned_output(DType dtype, int64_t M, int64_t H) {
  Buffer host(dtype, {M, H});
  std::memset(host.data(), 0xff, size_t(host.nbytes()));
  return OnDevice(host);
}

}  // namespace qmoe::test
