#pragma once
// Checked CUDA calls. Every runtime call and every launch in qmoe goes through one of these, so a
// failure surfaces as a qmoe::Error naming the call, the CUDA error and where it happened.
#include <cuda_runtime_api.h>

namespace qmoe {

// Throws qmoe::Error("<what>: <cudaGetErrorName>: <cudaGetErrorString> (file:line)") unless
// `status` is cudaSuccess.
void cuda_check(cudaError_t status, const char* what, const char* file, int line);

}  // namespace qmoe

// QMOE_CUDA_CHECK(cudaMemcpyAsync(...)); the expression text becomes the message's "what".
#define QMOE_CUDA_CHECK(expr) ::qmoe::cuda_check((expr), #expr, __FILE__, __LINE__)
