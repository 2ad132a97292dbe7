#pragma once
// The two ceilings of the floor, measured in the same run on the same GPU: device memory copy on
// the SMs (bytes read + written per second) and a large bf16 matmul on cuBLAS.
#include <cublas_v2.h>

namespace qmoe::bench {

struct Ceilings {
  double copy_bytes_per_s = 0;  // 1 GiB -> 1 GiB copy kernel: best launch shape's median of 20
  double bf16_flops_per_s = 0;  // cuBLAS 8192^3 bf16 (fp32 accumulation), random data, median
};

Ceilings measure_ceilings(cublasHandle_t handle, cudaStream_t stream);

}  // namespace qmoe::bench
