#include "cuda/device_buffer.hpp"

#include <utility>

#include "core/check.hpp"
#include "cuda/cuda_check.hpp"

namespace qmoe {

DeviceBuffer::DeviceBuffer(size_t bytes) : bytes_(bytes) {
  if (bytes == 0) return;
  const cudaError_t status = cudaMalloc(&data_, bytes);
  if (status != cudaSuccess) {
    data_ = nullptr;
    bytes_ = 0;
    fail("cudaMalloc of {} bytes failed: {}", bytes, cudaGetErrorString(status));
  }
}

DeviceBuffer::~DeviceBuffer() {
  if (data_) cudaFree(data_);  // no throw from a destructor; a failed free is a leak, not a crash
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    if (data_) cudaFree(data_);
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

void DeviceBuffer::upload(const void* host, size_t bytes) {
  check(bytes <= bytes_, "upload of {} bytes into a device buffer of {}", bytes, bytes_);
  QMOE_CUDA_CHECK(cudaMemcpy(data_, host, bytes, cudaMemcpyHostToDevice));
}

void DeviceBuffer::download(void* host, size_t bytes) const {
  check(bytes <= bytes_, "download of {} bytes from a device buffer of {}", bytes, bytes_);
  QMOE_CUDA_CHECK(cudaMemcpy(host, data_, bytes, cudaMemcpyDeviceToHost));
}

}  // namespace qmoe
