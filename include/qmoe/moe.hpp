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

  // The batched-experts format (ActivationFormat::batched_experts): what DeepEP's low-latency
  // dispatch hands each rank, rows already grouped by local expert. x [E, T_max, H] (E = the
  // layer's num_experts; dtype as forward takes), counts i32 [E], out [E, T_max, H] (dtype of x).
  // For every e and t < counts[e]: out[e, t] = expert e's MLP of x[e, t] (GEMM1, activation,
  // GEMM2, with the layer's biases), NOT multiplied by any router weight (the combine step
  // applies them; apply_router_weight_on_input is ignored here). Rows t >= counts[e] of out are
  // not written. counts lives where the backend runs: host memory for cpu and emulation, the
  // MoE's CUDA device for CUDA backends (so a forward stays graph-capturable: no host sync).
  // A count outside 0..T_max is an Error on the host; on CUDA the kernel clamps it into that
  // range and reports it as the routing faults are reported (see forward_routed): the layer's
  // next forward throws Error naming the expert and the count. The backend runs it when its
  // descriptor lists batched_experts, else the plan's large-batch backend when that one does
  // (cuda-wgmma does not), else Error naming the backends that do; MoEConfig::activation_format
  // = batched_experts makes "auto" pick one. On CUDA the forward uses the scratch of a routed
  // forward of ceil(E * T_max / top_k) tokens: reserve that many before capturing it in a graph.
  void forward_batched(TensorView x, TensorView counts, TensorView out,
                       void* stream = nullptr) const;

 private:
  // Returns the layer's description, which the plan's crossover reads too (describing an MXFP4
  // layer scans its scales, so it is done once).
  LayerDesc select_backend(const QuantizedExperts& experts, const std::string& backend);
  // Whether the selection's plan stays (MoEConfig::large_batch_backend); clears it when not.
  bool keeps_plan();
  // The plan's large-batch backend (Selection::plan), prepared beside prepared_ when the plan
  // stays.
  void prepare_large_batch_backend(const QuantizedExperts& experts, const LayerDesc& layer);
  int64_t check_hidden_and_out(const TensorView& hidden, const TensorView& out) const;
  // hidden's dtype against the config's, or against what `backend` takes when it names none.
  void check_activation_dtype(DType dtype, const Backend& backend) const;

  MoEConfig config_;
  Device device_;
  Selection selection_;
  const Backend* backend_ = nullptr;
  std::unique_ptr<PreparedExperts> prepared_;
  // The plan's second step, when there is one (Selection::plan). Declared after prepared_, so
  // destroyed before it: it may read prepared_'s codes (Backend::prepare_beside).
  const Backend* large_backend_ = nullptr;
  std::unique_ptr<PreparedExperts> large_prepared_;
  int64_t large_from_tokens_ = 0;
  DType large_dtype_ = DType::bf16;

  struct Runner {
    const Backend* backend;
    const PreparedExperts* prepared;
  };
  Runner runner_for(int64_t tokens, DType dtype) const;
  // The first backend of the plan that takes the batched-experts format; Error when none does.
  Runner batched_runner() const;
};

}  // namespace qmoe
