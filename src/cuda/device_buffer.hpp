#pragma once
// Owning device memory (cudaMalloc / cudaFree), movable, not copyable. Allocate once, up front
// (at prepare time or when a workspace grows), never per forward.
#include <cstddef>
#include <cstdint>
#include <vector>

namespace qmoe {

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  // Allocates `bytes` on the current device; throws qmoe::Error on failure. 0 bytes = empty.
  explicit DeviceBuffer(size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* data() const { return data_; }
  template <class T>
  T* as() const {
    return static_cast<T*>(data_);
  }
  size_t bytes() const { return bytes_; }
  bool empty() const { return bytes_ == 0; }

  // Synchronous host <-> device copies of `bytes` (default: the whole buffer), for setup and
  // tests; the hot path uses cudaMemcpyAsync on its stream.
  void upload(const void* host, size_t bytes);
  void download(void* host, size_t bytes) const;

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

// A device copy of `bytes` host bytes (empty for 0), and of a host vector.
inline DeviceBuffer to_device(const void* host, size_t bytes) {
  DeviceBuffer b(bytes);
  if (bytes > 0) b.upload(host, bytes);
  return b;
}
template <class T>
DeviceBuffer to_device(const std::vector<T>& host) {
  return to_device(host.data(), host.size() * sizeof(T));
}

}  // namespace qmoe
