#pragma once
// The scratch memory of the CUDA backends' forwards: one workspace per CUDA device and stream,
// shared by every CUDA layer on that device (engines run layers one after another on a stream, so
// one layer's scratch is free again when the next starts). The pool lives as long as some layer on
// its device does.
//
// A workspace grows (to the buffer-by-buffer maximum of what was asked, workspace_sizes.hpp) when a
// forward or MoE::reserve needs more, except while its stream is capturing a CUDA graph: that is an
// Error naming MoE::reserve. A graph keeps the addresses it was captured with, so a workspace
// that a capture used is never freed when it grows: it is kept until the pool goes away.
#include <cuda_runtime_api.h>

#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "backend/cuda_common/workspace_sizes.hpp"
#include "cuda/device_buffer.hpp"

namespace qmoe::cuda_common {

struct Workspace {
  WorkspaceSizes sizes;
  DeviceBuffer topk_weights, topk_ids;
  DeviceBuffer sorted_pair_ids, tile_experts, expert_offsets, padded_total, pair_rows,
      align_scratch;
  DeviceBuffer activated, gemm2_out;
  DeviceBuffer tail_partials, tail_flags;
  DeviceBuffer gathered, gemm1_out, group_args, gemm_scratch, row_group_sums;
};

class WorkspacePool {
 public:
  // The pool of CUDA device `device`, made on first use; every caller holding it shares it.
  static std::shared_ptr<WorkspacePool> for_device(int device);

  explicit WorkspacePool(int device) : device_(device) {}
  WorkspacePool(const WorkspacePool&) = delete;
  WorkspacePool& operator=(const WorkspacePool&) = delete;

  // The workspace of `stream` (on the current device, which must be this pool's), holding at
  // least `need`. Host threads must not enqueue on one stream at the same time while it grows.
  const Workspace& acquire(cudaStream_t stream, const WorkspaceSizes& need);

  // Bytes held for `stream` now (its current workspace; 0 without one) and in all (with the
  // workspaces kept for graphs), for tests and reports.
  size_t current_bytes(cudaStream_t stream) const;
  size_t held_bytes() const;

 private:
  // cudaStreamPerThread is one handle for a different stream in every host thread, so for it the
  // thread is part of the key.
  using StreamKey = std::pair<cudaStream_t, std::thread::id>;
  static StreamKey key_of(cudaStream_t stream);

  struct PerStream {
    std::unique_ptr<Workspace> current;
    bool captured = false;  // a capture has used `current`
    std::vector<std::unique_ptr<Workspace>> kept_for_graphs;
  };

  int device_ = 0;
  mutable std::mutex mutex_;
  std::map<StreamKey, PerStream> streams_;
};

}  // namespace qmoe::cuda_common
