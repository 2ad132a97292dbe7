#include "measure/gpu/cublas_check.hpp"

#include "core/check.hpp"

namespace qmoe::bench {

void cublas_check(cublasStatus_t status, const char* what, const char* file, int line) {
  if (status == CUBLAS_STATUS_SUCCESS) return;
  fail("{}: {} ({}:{})", what, cublasGetStatusString(status), file, line);
}

}  // namespace qmoe::bench
