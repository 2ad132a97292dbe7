#pragma once
// What a rank's forward needs beside its layer, on the rank's device: the whole layer's top-k
// routing seen by the rank (its local expert ids), and the buffers of the token-split form.
// Host ranks route with the CPU reference; CUDA ranks route on their GPU and enqueue everything on
// the forward's stream.
#include <cstdint>
#include <memory>

#include "qmoe/config.hpp"
#include "qmoe/shard.hpp"
#include "qmoe/tensor.hpp"

namespace qmoe {

class RankScratch {
 public:
  virtual ~RankScratch() = default;

  struct Routing {
    TensorView topk_weights;  // f32 [M, k]
    TensorView topk_ids;      // i32 [M, k], the rank's local ids
  };
  // router_logits f32 [M, E] (the whole layer's experts) on the rank's device. The views stay
  // valid until the next call.
  virtual Routing route(TensorView router_logits, void* stream) = 0;

  enum Slot : int { gathered_hidden, gathered_logits, partial_out, kSlots };
  // A contiguous [rows, cols] tensor of `dtype` on the rank's device, for `slot`'s use in one
  // forward. Grows the slot when needed, which is an Error while `stream` captures a CUDA graph.
  virtual TensorView tensor(Slot slot, DType dtype, int64_t rows, int64_t cols, void* stream) = 0;

  // Grows everything for forwards of up to `tokens` tokens (whole-batch rows) of `hidden` columns.
  void reserve(int64_t tokens, int64_t hidden, int64_t experts, void* stream) {
    route_reserve(tokens, stream);
    tensor(gathered_hidden, DType::f32, tokens, hidden, stream);
    tensor(gathered_logits, DType::f32, tokens, experts, stream);
    tensor(partial_out, DType::f32, tokens, hidden, stream);
  }

 protected:
  virtual void route_reserve(int64_t tokens, void* stream) = 0;
};

// `config` is the whole layer's (routing over all its experts); `rank` a rank of `plan`.
std::unique_ptr<RankScratch> host_rank_scratch(const MoEConfig& config, const ShardPlan& plan,
                                               int rank);
// Throws an Error in a build without CUDA.
std::unique_ptr<RankScratch> cuda_rank_scratch(const MoEConfig& config, const ShardPlan& plan,
                                               int rank, int device);

}  // namespace qmoe
