#pragma once
// One MoE layer across ranks: the collectives it needs (Communicator) and one rank's part of a
// layer split by a ShardPlan (ShardedMoE, qmoe/shard.hpp). Every rank runs its own ShardedMoE
// and calls each forward in the same order with the same sizes; a rank's output is exactly what
// the unsharded layer gives up to the order of f32 sums.
#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "qmoe/checkpoint.hpp"
#include "qmoe/config.hpp"
#include "qmoe/moe.hpp"
#include "qmoe/quant.hpp"
#include "qmoe/shard.hpp"
#include "qmoe/tensor.hpp"

namespace qmoe {

class RankScratch;

// Collectives over the `size()` ranks of one layer, on contiguous f32/f16/bf16 tensors in the
// memory the rank's forward uses. `stream` is the cudaStream_t the collective is ordered on for
// device memory (nullptr = the legacy default stream); host communicators ignore it. Every rank
// gets the same bits of a sum.
class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // data = the sum over ranks of every rank's data (in place).
  virtual void all_reduce_sum(TensorView data, void* stream = nullptr) = 0;
  // recv [size * n, ...] = every rank's send [n, ...], in rank order.
  virtual void all_gather(TensorView send, TensorView recv, void* stream = nullptr) = 0;
  // recv [n, ...] = rows [rank * n, (rank + 1) * n) of the sum over ranks of send [size * n, ...].
  virtual void reduce_scatter_sum(TensorView send, TensorView recv, void* stream = nullptr) = 0;
  // What every rank sends this one: element r of the result is element rank() of rank r's
  // `counts` (host values, one per rank). A device communicator waits for its stream.
  virtual std::vector<int64_t> exchange_counts(std::span<const int64_t> counts,
                                               void* stream = nullptr) = 0;
  // Rows to and from every rank: send [sum(send_rows), C] holds send_rows[r] rows for rank r,
  // rank after rank; recv [sum(recv_rows), C] gets recv_rows[r] rows from rank r, rank after
  // rank (recv_rows = exchange_counts(send_rows)). Rows move as bytes, so any dtype goes; both
  // contiguous, of one dtype.
  virtual void all_to_all(TensorView send, std::span<const int64_t> send_rows, TensorView recv,
                          std::span<const int64_t> recv_rows, void* stream = nullptr) = 0;
};

// `size` communicators whose ranks are threads of this process: rank r's communicator is element
// r, and each rank calls its collectives from its own thread (a collective waits for all ranks).
// Sums run over ranks in rank order in f32. Tensors in CUDA memory are copied through the host
// (the stream is synchronised), so several simulated ranks can share one GPU. For running and
// testing a sharded layer on one machine; not capturable in a CUDA graph.
std::vector<std::unique_ptr<Communicator>> local_communicators(int size);

// NCCL communicators, built when qmoe found NCCL at build time (nccl_built()); otherwise each
// factory throws an Error saying so. Collectives are enqueued on the given stream and return at
// once (capturable in a CUDA graph); tensors must be in the communicator's device memory. NCCL
// sums bf16/f16 in their own precision in its own order (every rank still gets the same bits).
bool nccl_built();
// Why nccl_built() is what it is: where NCCL was found and its version, or why not.
std::string nccl_status();
struct NcclUniqueId {
  std::array<char, 128> bytes{};  // ncclUniqueId, made by one rank and sent to all
};
NcclUniqueId nccl_unique_id();
// Joins the `size`-rank communicator of `id` as `rank` on CUDA device `device` (every rank calls
// it at the same time, one rank per GPU); the communicator owns the NCCL communicator.
std::unique_ptr<Communicator> nccl_communicator(const NcclUniqueId& id, int rank, int size,
                                                int device);
// Wraps an engine's ncclComm_t (passed as void*), which the engine keeps alive and destroys.
std::unique_ptr<Communicator> nccl_communicator(void* nccl_comm);
// One process driving every GPU of `devices`: rank r on CUDA device devices[r] (ncclCommInitAll).
std::vector<std::unique_ptr<Communicator>> nccl_communicators(std::span<const int> devices);

// Rank `comm.rank()` of a layer split by `plan`: its slice of the experts (shard_experts),
// prepared on `device` by `backend` like any layer. Routing is done once per rank for the whole
// layer (same logits, same ids on every rank), the rank's experts run on its channels, and the
// partial outputs are summed over ranks. On a CUDA device routing runs on that device and a
// forward enqueues everything on `stream` without host syncs (with an NCCL communicator it is
// capturable once reserve() has sized the scratch).
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

  ShardedMoE(ShardedMoE&&) noexcept;
  ~ShardedMoE();

  int rank() const { return comm_->rank(); }
  const MoE& local() const { return local_; }
  // Makes the scratch memory forwards of up to `max_tokens` tokens on `stream` use (tokens of
  // the whole batch: world size x n for forward_token_split), so that they allocate nothing.
  void reserve(int64_t max_tokens, void* stream = nullptr) const;

  // Ranks sharing one GPU (simulated ranks) must pass each its own stream: the layer's scratch
  // on a stream serves one forward at a time (MoE::reserve).
  //
  // Tokens replicated on every rank (tensor parallelism, and expert parallelism where the engine
  // broadcasts tokens): the same hidden [M, H] and router_logits f32 [M, E] on every rank, the
  // whole layer's out [M, H] on every rank (an all-reduce).
  void forward(TensorView hidden, TensorView router_logits, TensorView out,
               void* stream = nullptr) const;
  // Tokens split over the ranks: rank r passes its own n tokens (the same n on every rank) and
  // gets their rows of the output: all-gather of tokens and logits, the local experts on every
  // token, reduce-scatter of the sums.
  void forward_token_split(TensorView hidden, TensorView router_logits, TensorView out,
                           void* stream = nullptr) const;
  // Tokens split over the ranks, n of them on this rank (n may differ between ranks): only the
  // (token, slot) pairs routed to a rank's experts go there (counts exchanged first, then one
  // all-to-all of rows and one of their local expert ids), run there in the batched-experts
  // format (MoE::forward_batched), and come back to be weighed and summed in f32. A token moves
  // once per slot routed off its rank, so against the replicated forms it sends k / world as many
  // bytes: it pays when top-k is below the world size. Host ranks only (CPU backends, local
  // communicators) for now: CUDA ranks use forward or forward_token_split.
  void forward_dispatch(TensorView hidden, TensorView router_logits, TensorView out) const;

 private:
  struct RankSlice {};
  ShardedMoE(RankSlice, const MoEConfig& config, QuantizedExperts rank_experts,
             const ShardPlan& plan, Communicator& comm, const std::string& backend, Device device);
  // The rank's partial output [M, H] for the whole layer's tokens.
  void partial_forward(TensorView hidden, TensorView router_logits, TensorView out,
                       void* stream) const;

  MoEConfig config_;  // the whole layer's
  ShardPlan plan_;
  Communicator* comm_;
  MoE local_;
  std::unique_ptr<RankScratch> scratch_;
};

// One rank's slice of a checkpoint layer, equal to shard_experts(ckpt.load_layer(layer), plan,
// rank) but reading only the bytes of the files that hold it (Checkpoint::load_experts of the
// rank's experts and channels). A plan of word_bits 8 that cuts a packed 32-bit word is an Error
// naming the TP sizes that work.
QuantizedExperts load_shard(const Checkpoint& ckpt, int layer, const ShardPlan& plan, int rank);
// The bytes of the checkpoint's files load_shard reads for `rank` (Checkpoint::experts_bytes).
int64_t shard_bytes(const Checkpoint& ckpt, int layer, const ShardPlan& plan, int rank);

}  // namespace qmoe
