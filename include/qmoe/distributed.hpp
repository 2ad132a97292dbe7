#pragma once
// One MoE layer across ranks: the collectives it needs (Communicator) and one rank's part of a
// layer split by a ShardPlan (ShardedMoE, qmoe/shard.hpp). Every rank runs its own ShardedMoE
// and calls each forward in the same order with the same sizes; a rank's output is exactly what
// the unsharded layer gives up to the order of f32 sums.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "qmoe/checkpoint.hpp"
#include "qmoe/config.hpp"
#include "qmoe/moe.hpp"
#include "qmoe/quant.hpp"
#include "qmoe/shard.hpp"
#include "qmoe/tensor.hpp"

namespace qmoe {

// Collectives over the `size()` ranks of one layer, on contiguous f32/f16/bf16 tensors in the
// memory the rank's forward uses. Sums add the ranks in rank order (in f32), so every rank gets
// the same bits.
class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // data = the sum over ranks of every rank's data (in place).
  virtual void all_reduce_sum(TensorView data) = 0;
  // recv [size * n, ...] = every rank's send [n, ...], in rank order.
  virtual void all_gather(TensorView send, TensorView recv) = 0;
  // recv [n, ...] = rows [rank * n, (rank + 1) * n) of the sum over ranks of send [size * n, ...].
  virtual void reduce_scatter_sum(TensorView send, TensorView recv) = 0;
};

// `size` communicators whose ranks are threads of this process, over host memory: rank r's
// communicator is element r, and each rank calls its collectives from its own thread (a
// collective waits for all ranks). For running and testing a sharded layer on one machine.
std::vector<std::unique_ptr<Communicator>> local_communicators(int size);

// Rank `comm.rank()` of a layer split by `plan`: its slice of the experts (shard_experts),
// prepared on `device` by `backend` like any layer. Routing is done once per rank for the whole
// layer (same logits, same ids on every rank), the rank's experts run on its channels, and the
// partial outputs are summed over ranks. CPU ranks only for now: a CUDA device is an Error.
class ShardedMoE {
 public:
  // `experts` is the whole layer; the rank keeps its own slice only.
  ShardedMoE(const MoEConfig& config, const QuantizedExperts& experts, const ShardPlan& plan,
             Communicator& comm, const std::string& backend = "auto", Device device = {});
  // From the rank's own slice (shard_experts(layer, plan, comm.rank()), or load_shard), so the
  // rank never holds the whole layer.
  static ShardedMoE of_rank(const MoEConfig& config, QuantizedExperts rank_experts,
                            const ShardPlan& plan, Communicator& comm,
                            const std::string& backend = "auto", Device device = {});

  int rank() const { return comm_->rank(); }
  const MoE& local() const { return local_; }

  // Tokens replicated on every rank (tensor parallelism, and expert parallelism where the engine
  // broadcasts tokens): the same hidden [M, H] and router_logits f32 [M, E] on every rank, the
  // whole layer's out [M, H] on every rank (an all-reduce).
  void forward(TensorView hidden, TensorView router_logits, TensorView out) const;
  // Tokens split over the ranks: rank r passes its own n tokens (the same n on every rank) and
  // gets their rows of the output: all-gather of tokens and logits, the local experts on every
  // token, reduce-scatter of the sums.
  void forward_token_split(TensorView hidden, TensorView router_logits, TensorView out) const;

 private:
  struct RankSlice {};
  ShardedMoE(RankSlice, const MoEConfig& config, QuantizedExperts rank_experts,
             const ShardPlan& plan, Communicator& comm, const std::string& backend, Device device);
  // The rank's partial output [M, H] for the whole layer's tokens.
  void partial_forward(TensorView hidden, TensorView router_logits, TensorView out) const;

  MoEConfig config_;  // the whole layer's
  ShardPlan plan_;
  Communicator* comm_;
  MoE local_;
};

// One rank's slice of a checkpoint layer, equal to shard_experts(ckpt.load_layer(layer), plan,
// rank) but reading only the bytes of the files that hold it (Checkpoint::load_experts of the
// rank's experts and channels). A plan of word_bits 8 that cuts a packed 32-bit word is an Error
// naming the TP sizes that work.
QuantizedExperts load_shard(const Checkpoint& ckpt, int layer, const ShardPlan& plan, int rank);
// The bytes of the checkpoint's files load_shard reads for `rank` (Checkpoint::experts_bytes).
int64_t shard_bytes(const Checkpoint& ckpt, int layer, const ShardPlan& plan, int rank);

}  // namespace qmoe
