#pragma once
// The contract every backend implements: convert canonical weights once (prepare), then run
// forwards on routed tokens. Backends never see checkpoint formats; the oracle never sees a
// backend's internals.
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "qmoe/config.hpp"
#include "qmoe/quant.hpp"
#include "qmoe/tensor.hpp"

namespace qmoe {

// Int4 weight codes a prepared layer keeps on its device in the order cuda-mma and cuda-wgmma
// share (cuda/int4_code_order.hpp), [E] experts back to back, for a second backend's layer of the
// same weights to read instead of a copy of its own. Null where the layer holds none.
struct SharedInt4Codes {
  const void* w13 = nullptr;
  const void* w2 = nullptr;
  size_t w13_bytes = 0, w2_bytes = 0;
};

// Backend-owned weight layout on the backend's device.
class PreparedExperts {
 public:
  virtual ~PreparedExperts() = default;
  virtual SharedInt4Codes shared_int4_codes() const { return {}; }
};

struct RoutedBatch {
  TensorView hidden;        // [M, H]
  TensorView topk_weights;  // f32 [M, k]
  TensorView topk_ids;      // i32 [M, k], global expert ids
  TensorView out;           // [M, H], dtype of hidden
  void* stream = nullptr;   // cudaStream_t for CUDA backends
};

// The batched-experts activation format (MoE::forward_batched): rows already grouped by local
// expert. out[e, t] = expert e's MLP of x[e, t] (GEMM1, activation, GEMM2, biases), with no
// router weight, for t < counts[e]; rows from counts[e] on are not written.
struct BatchedBatch {
  TensorView x;            // [E, T_max, H], bf16/f16/f32 as the backend takes
  TensorView counts;       // i32 [E], on the backend's device
  TensorView out;          // [E, T_max, H], dtype of x
  void* stream = nullptr;  // cudaStream_t for CUDA backends
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string_view name() const = 0;
  virtual std::unique_ptr<PreparedExperts> prepare(const QuantizedExperts& experts,
                                                   const MoEConfig& config,
                                                   Device device) const = 0;
  // prepare with the canonical weights handed over, for the backend to free as it converts them
  // (the canonical and the converted copy of a weight need not all be alive at once). The default
  // converts with prepare, then frees them.
  virtual std::unique_ptr<PreparedExperts> prepare_owned(QuantizedExperts experts,
                                                         const MoEConfig& config,
                                                         Device device) const {
    return prepare(experts, config, device);
  }
  // prepare() for a layer whose weights `partner` (another backend's prepared layer of the same
  // weights and config, which must outlive the result) already holds on the same device: a backend
  // that can read the partner's codes (PreparedExperts::shared_int4_codes) reads them instead of
  // preparing its own copy. The default prepares a copy of its own.
  virtual std::unique_ptr<PreparedExperts> prepare_beside(
      const QuantizedExperts& experts, const MoEConfig& config, Device device,
      const PreparedExperts& /*partner*/) const {
    return prepare(experts, config, device);
  }
  // The host half of prepare(): every check and conversion it makes before touching a device,
  // throwing the Error prepare would throw for this layer (on the right device). It lets the
  // oracle's agreement with prepare be tested where the backend's device is missing. Backends
  // whose layout lives in host memory keep the default, prepare on the host.
  virtual void prepare_on_host(const QuantizedExperts& experts, const MoEConfig& config) const {
    prepare(experts, config, Device{});
  }
  // Top-k routing on the backend's device. The default runs the CPU reference on host tensors.
  virtual void route(const MoEConfig& config, TensorView router_logits, TensorView topk_weights,
                     TensorView topk_ids, void* stream) const;
  virtual void run(const PreparedExperts& prepared, const MoEConfig& config,
                   const RoutedBatch& batch) const = 0;
  // The batched-experts format, for backends whose descriptor lists it (shapes and dtypes already
  // checked by MoE). The default refuses: an Error naming the backend.
  virtual void run_batched(const PreparedExperts& prepared, const MoEConfig& config,
                           const BatchedBatch& batch) const;
  // Makes the scratch memory forwards of up to `max_tokens` tokens on `stream` use, so that they
  // allocate nothing (MoE::reserve). The default has none to make.
  virtual void reserve(const PreparedExperts& /*prepared*/, int64_t /*max_tokens*/,
                       void* /*stream*/) const {}
  // route + run. The default keeps the top-k on the host; device backends override it to use
  // workspace prepared with the weights.
  virtual void forward(const PreparedExperts& prepared, const MoEConfig& config, TensorView hidden,
                       TensorView router_logits, TensorView out, void* stream) const;
};

// A host backend's counts of a batched batch, each checked to lie in 0..T_max (else Error naming
// the backend, the expert and the valid range).
std::span<const int32_t> checked_host_counts(std::string_view backend, const BatchedBatch& batch);

// The experts' shapes, gating (w13's rows) and bias flags against the config's: every consumer
// of a layer sizes and orders its buffers by one of the two, so they must agree.
void check_experts_match_config(const MoEConfig& config, const QuantizedExperts& experts);

// Every backend compiled into this build, in no particular order.
const std::vector<const Backend*>& built_backends();
// nullptr when no backend of that name is built.
const Backend* find_backend(std::string_view name);

}  // namespace qmoe
