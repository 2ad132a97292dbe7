#pragma once
// What `qmoe bench` shares with moe_bench on a CUDA device, behind a header free of CUDA types:
// the same-run ceilings (ceilings.hpp) and the bf16 cuBLAS baseline (cublas_moe.hpp) on a
// canonical layer, fed with token sets routed on the host.
#include <memory>
#include <string>
#include <vector>

#include "qmoe/config.hpp"
#include "qmoe/quant.hpp"
#include "qmoe/tensor.hpp"

namespace qmoe::bench {

struct DeviceCeilings {
  double copy_bytes_per_s = 0;  // bytes read + written per second by the SM copy kernel
  double bf16_flops_per_s = 0;  // cuBLAS 8192^3 bf16 matmul
};

// measure_ceilings on CUDA device `device`, with a cuBLAS handle and a stream of its own.
DeviceCeilings measure_device_ceilings(int device);

// Empty when the baseline computes what `config` asks for with `activation` dtype activations
// (bf16, SiLU-gated, no bias, router weights applied to the output); else why it does not.
std::string cublas_baseline_unfit(const MoEConfig& config, DType activation);

class CublasLayerBaseline {
 public:
  // `experts` dequantized on the host one weight at a time, kept on `device` in bf16.
  CublasLayerBaseline(const MoEConfig& config, const QuantizedExperts& experts, int device);
  ~CublasLayerBaseline();
  CublasLayerBaseline(const CublasLayerBaseline&) = delete;
  CublasLayerBaseline& operator=(const CublasLayerBaseline&) = delete;

  // Replaces the token sets (host buffers, set i from element i of each): hidden bf16 [M, H],
  // topk_weights f32 [M, k], topk_ids i32 [M, k]; rows are grouped by expert here, on the host.
  void set_tokens(const std::vector<Buffer>& hidden, const std::vector<Buffer>& topk_weights,
                  const std::vector<Buffer>& topk_ids);
  // One forward over every set, finished when it returns.
  void run_sets() const;
  // Set `set`'s last output, bf16 [M, H], into a host buffer of that shape.
  void copy_out(size_t set, Buffer& out) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace qmoe::bench
