// The few cuBLAS entry points the benchmarks call, defined here and forwarded to libcublas opened
// with dlopen on first use, instead of linking it: loading libcublas and libcublasLt adds ~200 MB
// of resident memory to every process that links them (`qmoe --version` went from 15 to 223 MB),
// and the qmoe tool needs cuBLAS only for `bench` on a GPU.
#include <cublas_v2.h>
#include <dlfcn.h>

#include <string>

#include "core/check.hpp"

namespace qmoe::bench {
namespace {

void* cublas_symbol(const char* name) {
  static void* const library = [] {
    // The loader's search first (LD_LIBRARY_PATH, ld.so.cache), then the toolkit built against.
    const std::string file = "libcublas.so." + std::to_string(CUBLAS_VER_MAJOR);
    void* handle = ::dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle) handle = ::dlopen((QMOE_CUBLAS_DIR "/" + file).c_str(), RTLD_NOW | RTLD_LOCAL);
    check(handle != nullptr, "cannot load {} (the cuBLAS baseline needs it): {}", file,
          ::dlerror());
    return handle;
  }();
  void* symbol = ::dlsym(library, name);
  check(symbol != nullptr, "libcublas has no {}", name);
  return symbol;
}

// The function `name` of libcublas, with the type of our own declaration `F`.
template <class F>
F* cublas_function(const char* name) {
  return reinterpret_cast<F*>(cublas_symbol(name));
}

}  // namespace
}  // namespace qmoe::bench

using qmoe::bench::cublas_function;

extern "C" {

cublasStatus_t cublasCreate_v2(cublasHandle_t* handle) {
  static auto* f = cublas_function<decltype(cublasCreate_v2)>("cublasCreate_v2");
  return f(handle);
}

cublasStatus_t cublasDestroy_v2(cublasHandle_t handle) {
  static auto* f = cublas_function<decltype(cublasDestroy_v2)>("cublasDestroy_v2");
  return f(handle);
}

cublasStatus_t cublasSetStream_v2(cublasHandle_t handle, cudaStream_t stream) {
  static auto* f = cublas_function<decltype(cublasSetStream_v2)>("cublasSetStream_v2");
  return f(handle, stream);
}

cublasStatus_t cublasSetWorkspace_v2(cublasHandle_t handle, void* workspace, size_t bytes) {
  static auto* f = cublas_function<decltype(cublasSetWorkspace_v2)>("cublasSetWorkspace_v2");
  return f(handle, workspace, bytes);
}

const char* cublasGetStatusString(cublasStatus_t status) {
  static auto* f = cublas_function<decltype(cublasGetStatusString)>("cublasGetStatusString");
  return f(status);
}

cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa,
                            cublasOperation_t transb, int m, int n, int k, const void* alpha,
                            const void* A, cudaDataType Atype, int lda, const void* B,
                            cudaDataType Btype, int ldb, const void* beta, void* C,
                            cudaDataType Ctype, int ldc, cublasComputeType_t computeType,
                            cublasGemmAlgo_t algo) {
  using GemmEx =
      cublasStatus_t(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                     const void*, const void*, cudaDataType, int, const void*, cudaDataType, int,
                     const void*, void*, cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t);
  static auto* f = cublas_function<GemmEx>("cublasGemmEx");
  return f(handle, transa, transb, m, n, k, alpha, A, Atype, lda, B, Btype, ldb, beta, C, Ctype,
           ldc, computeType, algo);
}

}  // extern "C"
