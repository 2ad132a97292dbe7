#pragma once
// The user-facing MoE layer: canonical experts + config + a backend, ready to run forwards.
#include <memory>
#include <string>

#include "qmoe/config.hpp"
#include "qmoe/oracle.hpp"
#include "qmoe/quant.hpp"
#include "qmoe/tensor.hpp"

namespace qmoe {

class Backend;
class PreparedExperts;

class MoE {
 public:
  // `backend` is a backend name ("emulation", "cpu", "cuda-mma", ...) or "auto" for the oracle's
  // choice on `device`. Weights are converted once, here, into the backend's layout.
  MoE(MoEConfig config, const QuantizedExperts& experts, const std::string& backend = "auto",
      Device device = {});
  // Same, taking the experts over: backends that can free each canonical weight once converted
  // (cpu) need less peak memory than a copy of the whole layer.
  MoE(MoEConfig config, QuantizedExperts&& experts, const std::string& backend = "auto",
      Device device = {});
  ~MoE();
  MoE(MoE&&) noexcept;
  MoE& operator=(MoE&&) noexcept;

  const MoEConfig& config() const { return config_; }
  std::string_view backend_name() const;
  // The backend a forward of `tokens` tokens runs on: backend_name(), or the plan's large-batch
  // backend from its crossover on (Selection::plan; bf16/f16 as the MoE was prepared for).
  std::string_view backend_for(int64_t tokens, DType dtype) const;
  // How the backend was chosen: the oracle's verdict on every backend (a named backend is checked
  // by the same rules and the others' verdicts say whether they would have run too).
  const Selection& selection() const { return selection_; }

  // Makes the scratch memory that forwards of up to `max_tokens` tokens on `stream` (a
  // cudaStream_t; nullptr = the legacy default stream) use, so that they allocate nothing. Call it
  // with the largest batch before capturing forwards in a CUDA graph: a forward that needs more
  // scratch than its stream holds while that stream captures is an Error. Scratch is shared by
  // every MoE on the same device and stream (layers run one after another), grows when a larger
  // batch runs outside a capture, and memory a captured graph uses stays allocated while any MoE
  // on the device lives. Nothing to do on the CPU backends.
  void reserve(int64_t max_tokens, void* stream = nullptr) const;

  // hidden [M, H] (f32/f16/bf16), router_logits [M, E] (f32) -> out [M, H] (dtype of hidden).
  // `stream` is a cudaStream_t for CUDA backends, ignored on the CPU.
  void forward(TensorView hidden, TensorView router_logits, TensorView out,
               void* stream = nullptr) const;

  // Same, with routing already done: topk_weights f32 [M, k], topk_ids i32 [M, k].
  // Routing input, on every backend: ids in 0..E-1, finite weights and logits, else Error; a
  // repeated id counts once per slot; M = 0 does nothing. CUDA backends check ids, weights and
  // logits at once only when QMOE_CHECK_ROUTING=1 (a host sync per forward). Otherwise their
  // kernels report an out-of-range id (which adds nothing to its token) or a non-finite weight
  // made from the logits, and the layer's next forward or forward_routed, once the caller has
  // synchronised, throws Error naming the token, slot and value; a non-finite weight given to
  // forward_routed propagates into its token's output.
  void forward_routed(TensorView hidden, TensorView topk_weights, TensorView topk_ids,
                      TensorView out, void* stream = nullptr) const;

 private:
  void select_backend(const QuantizedExperts& experts, const std::string& backend);
  // The plan's large-batch backend (Selection::plan), prepared too; clears the plan when the
  // config asks for one backend.
  void prepare_large_batch_backend(const QuantizedExperts& experts);
  int64_t check_hidden_and_out(const TensorView& hidden, const TensorView& out) const;

  MoEConfig config_;
  Device device_;
  Selection selection_;
  const Backend* backend_ = nullptr;
  std::unique_ptr<PreparedExperts> prepared_;
  // The plan's second step, when there is one (Selection::plan).
  const Backend* large_backend_ = nullptr;
  std::unique_ptr<PreparedExperts> large_prepared_;
  int64_t large_from_tokens_ = 0;
  DType large_dtype_ = DType::bf16;

  struct Runner {
    const Backend* backend;
    const PreparedExperts* prepared;
  };
  Runner runner_for(int64_t tokens, DType dtype) const;
};

}  // namespace qmoe
