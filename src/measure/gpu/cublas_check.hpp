#pragma once
// Checked cuBLAS calls for the benchmark: a failure becomes a qmoe::Error naming the call.
#include <cublas_v2.h>

namespace qmoe::bench {

void cublas_check(cublasStatus_t status, const char* what, const char* file, int line);

}  // namespace qmoe::bench

#define QMOE_CUBLAS_CHECK(expr) ::qmoe::bench::cublas_check((expr), #expr, __FILE__, __LINE__)
