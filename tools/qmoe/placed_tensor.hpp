#pragma once
// A host buffer made available on a device for the tool's runs: on the CPU the buffer itself, on
// a CUDA device a copy in device memory.
#include <memory>

#include "qmoe/tensor.hpp"

namespace qmoe::cli {

class PlacedTensor {
 public:
  PlacedTensor(const Buffer& host, Device device);
  ~PlacedTensor();
  PlacedTensor(PlacedTensor&&) noexcept;
  PlacedTensor& operator=(PlacedTensor&&) noexcept;

  TensorView view() const { return view_; }
  void copy_to(Buffer& host) const;

 private:
  struct DeviceCopy;
  std::unique_ptr<DeviceCopy> device_copy_;
  TensorView view_;
};

// A stream of its own on a CUDA device (nullptr, the default, on the CPU): ranks sharing a GPU
// each need one, as a stream's scratch serves one forward at a time.
class DeviceStream {
 public:
  explicit DeviceStream(Device device);
  ~DeviceStream();
  DeviceStream(const DeviceStream&) = delete;
  DeviceStream& operator=(const DeviceStream&) = delete;
  void* get() const { return stream_; }

 private:
  void* stream_ = nullptr;
};

// Waits until the device has finished all work queued so far (no-op on the CPU); makes it the
// calling thread's current device.
void synchronize(Device device);

}  // namespace qmoe::cli
