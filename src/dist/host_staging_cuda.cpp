#include <vector>

#include "core/check.hpp"
#include "cuda/device_scope.hpp"
#include "dist/host_staging.hpp"

namespace qmoe {

HostStaged::HostStaged(TensorView t, void* stream, Contents contents)
    : original_(t), host_(t), stream_(stream) {
  if (t.device().kind == DeviceKind::cpu) return;
  check(t.is_contiguous(), "a CUDA tensor staged through the host must be contiguous, got {}",
        t.describe());
  std::vector<int64_t> shape;
  for (int i = 0; i < t.rank(); ++i) shape.push_back(t.dim(i));
  copy_ = Buffer(t.dtype(), shape);
  host_ = TensorView(copy_.data(), t.dtype(), shape);
  if (contents == write_only) return;
  DeviceScope scope(t.device().index);
  const auto s = static_cast<cudaStream_t>(stream);
  QMOE_CUDA_CHECK(
      cudaMemcpyAsync(copy_.data(), t.data(), size_t(t.nbytes()), cudaMemcpyDeviceToHost, s));
  QMOE_CUDA_CHECK(cudaStreamSynchronize(s));
}

void HostStaged::write_back() const {
  if (original_.device().kind == DeviceKind::cpu) return;
  DeviceScope scope(original_.device().index);
  const auto s = static_cast<cudaStream_t>(stream_);
  QMOE_CUDA_CHECK(cudaMemcpyAsync(original_.data(), copy_.data(), size_t(original_.nbytes()),
                                  cudaMemcpyHostToDevice, s));
  QMOE_CUDA_CHECK(cudaStreamSynchronize(s));
}

}  // namespace qmoe
