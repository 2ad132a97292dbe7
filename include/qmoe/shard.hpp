#pragma once
// Tensor- and expert-parallel sharding of one MoE layer, planned and checked on the host before
// any weight moves.
//
// World of tp_size * ep_size ranks; rank = ep_rank * tp_size + tp_rank.
//  - EP: experts are split into ep_size contiguous blocks (the first E % ep_size ranks hold one
//    more); routing ids stay global and each rank maps them through its expert map.
//  - TP: every expert's intermediate channels [0, I) are split into tp_size contiguous slices of
//    I/tp. w13 is split on N: a rank takes its slice of the gate rows AND the same slice of the up
//    rows ([gate; up] halves are cut separately; swigluoai's interleaved rows in pairs). w2 is
//    split on K with its scales, zero points and g_idx. Each rank's output is a partial sum; the
//    sum over ranks (an all-reduce) is the layer's output.
//  - w2's bias is added by tp_rank 0 only (not divided by tp), so the sum over ranks adds it
//    exactly once and bit-for-bit.
//  - Act-order w2 keeps the scale/zero table of the whole K on every rank (its g_idx slice holds
//    global group ids): QuantizedWeight::K_full, upstream's "is_k_full = false".
#include <cstdint>
#include <string>
#include <vector>

#include "qmoe/config.hpp"
#include "qmoe/oracle.hpp"
#include "qmoe/quant.hpp"
#include "qmoe/tensor.hpp"

namespace qmoe {

// A top-k id that CUDA backends' forward_routed takes besides 0..E-1: the slot's expert lives on
// another rank (expert parallelism), so the slot is dropped and adds nothing to its token.
inline constexpr int32_t kExpertNotHere = -1;

struct ShardSpec {
  int tp_size = 1;
  int ep_size = 1;
  // The storage word a rank's slice must not cut. Checkpoints pack codes and zero points in
  // 32-bit words (GPTQ/compressed-tensors codes along K, AWQ codes and every format's zero
  // points along N), so 32 lets each rank read its slice straight from the files. qmoe's
  // canonical bytes need only 8.
  int word_bits = 32;
};

struct RankShard {
  int rank = 0, tp_rank = 0, ep_rank = 0;
  int64_t first_expert = 0, num_experts = 0;    // global experts [first, first + num)
  int64_t first_channel = 0, intermediate = 0;  // channels [first, first + I/tp) of I
  bool w2_bias = false;                         // this rank adds w2's bias
};

struct ShardPlan {
  LayerDesc layer;  // the whole layer
  ShardSpec spec;
  std::vector<RankShard> ranks;  // world_size() entries, by rank

  int world_size() const { return spec.tp_size * spec.ep_size; }
  // [E] global expert id -> local id on `rank`, -1 where the expert lives on another rank.
  std::vector<int32_t> expert_map(int rank) const;
  // What one rank's shard looks like to the oracle (local experts, I/tp, full-K act-order scales).
  LayerDesc rank_layer(int rank) const;
};

// Throws Error for what cannot be sharded correctly (a slice that cuts a quantization group or a
// packed word, more ranks than experts or channels, ...), naming the rule and the sizes that work.
ShardPlan plan_shards(const LayerDesc& layer, const ShardSpec& spec);

// One rank's experts and config, ready for any backend (MoE(shard_config, shard_experts, ...)).
// The shard's routing config keeps top-k but no grouping or correction bias: routing happens once
// for the whole layer, and shards run forward_routed on localize_routing's ids.
QuantizedExperts shard_experts(const QuantizedExperts& experts, const ShardPlan& plan, int rank);
MoEConfig shard_config(const MoEConfig& config, const ShardPlan& plan, int rank);

struct LocalRouting {
  Buffer topk_weights;  // f32 [M, k]: 0 where the expert is on another rank
  Buffer topk_ids;      // i32 [M, k]: local ids (0 where the expert is on another rank)
};
// The whole layer's routing (host f32/i32 [M, k]) as seen by `rank`. Zero weights make remote
// slots contribute nothing, which holds unless router weights are applied on the input of a layer
// with bias (then dispatch only local tokens instead; that case is an Error here).
LocalRouting localize_routing(const ShardPlan& plan, int rank, TensorView topk_weights,
                              TensorView topk_ids);

}  // namespace qmoe
