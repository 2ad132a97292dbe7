#include "placed_tensor.hpp"

#include <cstring>

#include "core/check.hpp"
#ifdef QMOE_WITH_CUDA
#include <cuda_runtime_api.h>

#include "cuda/cuda_check.hpp"
#include "cuda/device_buffer.hpp"
#endif

namespace qmoe::cli {

#ifdef QMOE_WITH_CUDA
struct PlacedTensor::DeviceCopy {
  DeviceBuffer memory;
};
#else
struct PlacedTensor::DeviceCopy {};
#endif

PlacedTensor::PlacedTensor(const Buffer& host, Device device) {
  if (device.kind == DeviceKind::cpu) {
    view_ = host.view();
    return;
  }
#ifdef QMOE_WITH_CUDA
  QMOE_CUDA_CHECK(cudaSetDevice(device.index));
  device_copy_ = std::make_unique<DeviceCopy>();
  device_copy_->memory = DeviceBuffer(static_cast<size_t>(host.nbytes()));
  device_copy_->memory.upload(host.data(), static_cast<size_t>(host.nbytes()));
  view_ = TensorView(device_copy_->memory.data(), host.dtype(), host.shape(), device);
#else
  fail("this qmoe was built without CUDA, so it cannot place tensors on {}", to_string(device));
#endif
}

PlacedTensor::~PlacedTensor() = default;
PlacedTensor::PlacedTensor(PlacedTensor&&) noexcept = default;
PlacedTensor& PlacedTensor::operator=(PlacedTensor&&) noexcept = default;

void PlacedTensor::copy_to(Buffer& host) const {
  check(host.nbytes() == view_.nbytes(), "copy_to: host buffer has {} bytes, tensor has {}",
        host.nbytes(), view_.nbytes());
  if (!device_copy_) {
    if (host.data() != view_.data())
      std::memcpy(host.data(), view_.data(), static_cast<size_t>(host.nbytes()));
    return;
  }
#ifdef QMOE_WITH_CUDA
  device_copy_->memory.download(host.data(), static_cast<size_t>(host.nbytes()));
#endif
}

DeviceStream::DeviceStream(Device device) {
  if (device.kind == DeviceKind::cpu) return;
#ifdef QMOE_WITH_CUDA
  QMOE_CUDA_CHECK(cudaSetDevice(device.index));
  cudaStream_t s = nullptr;
  QMOE_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  stream_ = s;
#endif
}

DeviceStream::~DeviceStream() {
#ifdef QMOE_WITH_CUDA
  if (stream_) cudaStreamDestroy(static_cast<cudaStream_t>(stream_));
#endif
}

void synchronize(Device device) {
  if (device.kind == DeviceKind::cpu) return;
#ifdef QMOE_WITH_CUDA
  QMOE_CUDA_CHECK(cudaSetDevice(device.index));
  QMOE_CUDA_CHECK(cudaDeviceSynchronize());
#endif
}

}  // namespace qmoe::cli
