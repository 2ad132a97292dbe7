#include "measure/gpu/ceilings.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <vector>

#include "cuda/cuda_check.hpp"
#include "cuda/device_buffer.hpp"
#include "measure/gpu/bench_kernels.hpp"
#include "measure/gpu/cublas_check.hpp"
#include "measure/gpu/timing.hpp"

namespace qmoe::bench {

namespace {

double median_seconds(int warmups, int reps, cudaStream_t stream,
                      const std::function<void()>& work) {
  for (int i = 0; i < warmups; ++i) work();
  EventTimer timer;
  std::vector<double> seconds;
  for (int i = 0; i < reps; ++i) seconds.push_back(timer.ms(stream, work) / 1000.0);
  std::sort(seconds.begin(), seconds.end());
  return seconds[seconds.size() / 2];
}

}  // namespace

Ceilings measure_ceilings(cublasHandle_t handle, cudaStream_t stream) {
  Ceilings c;
  {
    const int64_t bytes = int64_t(1) << 30;
    DeviceBuffer src(bytes), dst(bytes);
    QMOE_CUDA_CHECK(fill_normal_f32(src.as<float>(), bytes / 4, 1, 1.0f, stream));
    // The ceiling is the best this copy kernel does over a few launch shapes.
    double s = INFINITY;
    for (int blocks_per_sm : {4, 16})
      for (bool streaming : {false, true})
        s = std::min(s, median_seconds(3, 20, stream, [&] {
                       QMOE_CUDA_CHECK(sm_copy(src.data(), dst.data(), bytes, blocks_per_sm,
                                               streaming, stream));
                     }));
    c.copy_bytes_per_s = 2.0 * static_cast<double>(bytes) / s;
  }
  {
    const int n = 8192;
    const int64_t elems = int64_t(n) * n;
    DeviceBuffer a(elems * 2), b(elems * 2), d(elems * 2);
    QMOE_CUDA_CHECK(fill_normal_bf16(a.as<uint16_t>(), elems, 2, 1.0f, stream));
    QMOE_CUDA_CHECK(fill_normal_bf16(b.as<uint16_t>(), elems, 3, 1.0f, stream));
    QMOE_CUBLAS_CHECK(cublasSetStream(handle, stream));
    const float one = 1.0f, zero = 0.0f;
    const double s = median_seconds(3, 10, stream, [&] {
      QMOE_CUBLAS_CHECK(cublasGemmEx(handle, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, a.data(),
                                     CUDA_R_16BF, n, b.data(), CUDA_R_16BF, n, &zero, d.data(),
                                     CUDA_R_16BF, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    });
    c.bf16_flops_per_s = 2.0 * n * static_cast<double>(n) * n / s;
  }
  return c;
}

}  // namespace qmoe::bench
