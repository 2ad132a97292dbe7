#include "cuda/cuda_check.hpp"

#include "core/check.hpp"

namespace qmoe {

void cuda_check(cudaError_t status, const char* what, const char* file, int line) {
  if (status == cudaSuccess) return;
  fail("{}: {}: {} ({}:{})", what, cudaGetErrorName(status), cudaGetErrorString(status), file,
       line);
}

}  // namespace qmoe
