#include "backend/cuda_common/workspace_pool.hpp"

#include <fmt/format.h>

#include "core/check.hpp"
#include "cuda/cuda_check.hpp"

namespace qmoe::cuda_common {

namespace {

// Whether work enqueued on `stream` now would be captured into a graph. The legacy default stream
// answers cudaErrorStreamCaptureImplicit while another stream captures in global mode: enqueueing
// there would break that capture, so it counts as capturing.
bool is_capturing(cudaStream_t stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  const cudaError_t e = cudaStreamIsCapturing(stream, &status);
  if (e == cudaErrorStreamCaptureImplicit) {
    (void)cudaGetLastError();
    return true;
  }
  QMOE_CUDA_CHECK(e);
  return status != cudaStreamCaptureStatusNone;
}

std::string stream_name(cudaStream_t stream) {
  if (stream == nullptr) return "the legacy default stream";
  if (stream == cudaStreamPerThread) return "the per-thread default stream";
  return fmt::format("stream {}", static_cast<const void*>(stream));
}

std::unique_ptr<Workspace> make_workspace(const WorkspaceSizes& s, cudaStream_t stream) {
  auto w = std::make_unique<Workspace>();
  w->sizes = s;
  w->topk_weights = DeviceBuffer(s.topk_weights);
  w->topk_ids = DeviceBuffer(s.topk_ids);
  w->sorted_pair_ids = DeviceBuffer(s.sorted_pair_ids);
  w->tile_experts = DeviceBuffer(s.tile_experts);
  w->expert_offsets = DeviceBuffer(s.expert_offsets);
  w->padded_total = DeviceBuffer(s.padded_total);
  w->pair_rows = DeviceBuffer(s.pair_rows);
  w->align_scratch = DeviceBuffer(s.align_scratch);
  w->activated = DeviceBuffer(s.activated);
  w->gemm2_out = DeviceBuffer(s.gemm2_out);
  w->tail_partials = DeviceBuffer(s.tail_partials);
  w->tail_flags = DeviceBuffer(s.tail_flags);
  w->gathered = DeviceBuffer(s.gathered);
  w->gemm1_out = DeviceBuffer(s.gemm1_out);
  w->group_args = DeviceBuffer(s.group_args);
  w->gemm_scratch = DeviceBuffer(s.gemm_scratch);
  w->row_group_sums = DeviceBuffer(s.row_group_sums);
  // Rows past a tile's last pair are computed but never read; clear them once, in the order of
  // the stream that will use them, so that no kernel ever reads memory nothing wrote. The tail
  // flags start at zero (each launch leaves them so).
  for (DeviceBuffer* b : {&w->activated, &w->gemm2_out, &w->tail_flags})
    if (!b->empty()) QMOE_CUDA_CHECK(cudaMemsetAsync(b->data(), 0, b->bytes(), stream));
  return w;
}

}  // namespace

std::shared_ptr<WorkspacePool> WorkspacePool::for_device(int device) {
  static std::mutex mutex;
  static std::map<int, std::weak_ptr<WorkspacePool>> pools;
  const std::lock_guard lock(mutex);
  std::shared_ptr<WorkspacePool> pool = pools[device].lock();
  if (!pool) {
    pool = std::make_shared<WorkspacePool>(device);
    pools[device] = pool;
  }
  return pool;
}

WorkspacePool::StreamKey WorkspacePool::key_of(cudaStream_t stream) {
  return {stream, stream == cudaStreamPerThread ? std::this_thread::get_id() : std::thread::id{}};
}

const Workspace& WorkspacePool::acquire(cudaStream_t stream, const WorkspaceSizes& need) {
  int current_device = 0;
  QMOE_CUDA_CHECK(cudaGetDevice(&current_device));
  check(current_device == device_, "workspace of cuda:{} asked for on cuda:{}", device_,
        current_device);
  const bool capturing = is_capturing(stream);
  const std::lock_guard lock(mutex_);
  PerStream& s = streams_[key_of(stream)];
  const WorkspaceSizes have = s.current ? s.current->sizes : WorkspaceSizes{};
  const WorkspaceSizes sizes = grown_sizes(
      have, need, capturing, fmt::format("{} of cuda:{}", stream_name(stream), device_));
  if (!s.current || !(sizes == have)) {
    if (s.captured) s.kept_for_graphs.push_back(std::move(s.current));
    s.current = make_workspace(sizes, stream);
    s.captured = false;
  }
  s.captured = s.captured || capturing;
  return *s.current;
}

size_t WorkspacePool::current_bytes(cudaStream_t stream) const {
  const std::lock_guard lock(mutex_);
  const auto it = streams_.find(key_of(stream));
  return it == streams_.end() || !it->second.current ? 0 : it->second.current->sizes.total();
}

size_t WorkspacePool::held_bytes() const {
  const std::lock_guard lock(mutex_);
  size_t sum = 0;
  for (const auto& [key, s] : streams_) {
    if (s.current) sum += s.current->sizes.total();
    for (const auto& kept : s.kept_for_graphs) sum += kept->sizes.total();
  }
  return sum;
}

}  // namespace qmoe::cuda_common
