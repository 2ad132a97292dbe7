#pragma once
// Programmatic dependent launch (sm_90+): a kernel of the forward is launched while the kernel
// before it on the stream still runs, so its CTAs are placed on SMs and set up their shared
// memory during the earlier kernel's last wave, and start the moment that kernel completes.
// Without it every kernel boundary of a decode forward (align -> GEMM1 -> GEMM2 -> combine) costs
// a full drain and launch.
//
// The contract that keeps this correct: every kernel launched by launch_dependent calls
// wait_for_prior_grids() before its first global-memory access, read or write. The wait returns
// once every earlier grid on the stream has completed and its writes are visible, so each kernel
// of the chain also waits, transitively, for all kernels before it; a kernel that skipped the
// wait could race with any of them.
#include <cuda_runtime.h>

#include <utility>

#include "cuda/device.hpp"

namespace qmoe::cuda {

// Blocks until the grids this one depends on have completed and their memory is visible (a
// no-op when the kernel was launched without the attribute, and below sm_90).
__device__ __forceinline__ void wait_for_prior_grids() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// Lets the next kernel on the stream be launched before this one completes (its CTAs then wait
// in wait_for_prior_grids). Called right after the wait, so that when kernel N + 1 starts,
// kernel N - 1 has completed.
__device__ __forceinline__ void release_dependent_grids() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;");
#endif
}

// kernel<<<grid, block, shared_bytes, stream>>>(args...), allowed to start before the previous
// kernel on the stream completes where the device supports it (see the contract above).
template <class... Params, class... Args>
cudaError_t launch_dependent(void (*kernel)(Params...), dim3 grid, dim3 block, size_t shared_bytes,
                             cudaStream_t stream, Args&&... args) {
  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute.val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = shared_bytes;
  config.stream = stream;
  config.attrs = &attribute;
  config.numAttrs = current_device_launches_dependents() ? 1 : 0;
  const cudaError_t status = cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...);
  // Returned, not left pending: a later `<<<...>>>; cudaGetLastError()` launch elsewhere would
  // report it as its own.
  if (status != cudaSuccess) cudaGetLastError();
  return status;
}

}  // namespace qmoe::cuda
