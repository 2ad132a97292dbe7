#include "dist/localize_routing.hpp"
#include "qmoe/shard.hpp"

namespace qmoe {

namespace {

__global__ void localize_kernel(int32_t* __restrict__ ids, int64_t pairs, int32_t first,
                                int32_t count) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < pairs;
       i += int64_t(gridDim.x) * blockDim.x) {
    // Unsigned compare: ids below `first` wrap to large values and fall outside too.
    const uint32_t local = static_cast<uint32_t>(ids[i]) - static_cast<uint32_t>(first);
    ids[i] = local < static_cast<uint32_t>(count) ? static_cast<int32_t>(local) : kExpertNotHere;
  }
}

}  // namespace

cudaError_t localize_routing_cuda(int32_t* topk_ids, int64_t pairs, int32_t first, int32_t count,
                                  cudaStream_t stream) {
  if (pairs < 0 || first < 0 || count < 0) return cudaErrorInvalidValue;
  if (pairs == 0) return cudaSuccess;
  constexpr int kThreads = 256;
  const int64_t blocks = (pairs + kThreads - 1) / kThreads;
  localize_kernel<<<static_cast<unsigned>(blocks < 1024 ? blocks : 1024), kThreads, 0, stream>>>(
      topk_ids, pairs, first, count);
  return cudaGetLastError();
}

}  // namespace qmoe
