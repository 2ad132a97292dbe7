// Cutting one rank's shard out of the canonical weights, following a checked ShardPlan.
#include <cstring>
#include <numeric>

#include "core/check.hpp"
#include "qmoe/shard.hpp"

namespace qmoe {

namespace {

struct Range {
  int64_t first = 0, count = 0;
};

// dst[e, i, j] = src[experts.first + e, rows[i], cols.first + j], src row-major [E, R, C] of any
// element type (a 2-D source is [E, R, 1] or [E, 1, C]); dst holds ne * rows * cols elements.
void gather_into(const Buffer& src, int64_t R, int64_t C, Range experts,
                 const std::vector<int64_t>& rows, Range cols, Buffer& dst) {
  const int64_t elem = size_of(src.dtype()), n_rows = static_cast<int64_t>(rows.size());
  const auto* from = static_cast<const std::byte*>(src.data());
  auto* to = static_cast<std::byte*>(dst.data());
  for (int64_t e = 0; e < experts.count; ++e) {
    for (int64_t i = 0; i < n_rows; ++i) {
      const int64_t at = ((experts.first + e) * R + rows[static_cast<size_t>(i)]) * C + cols.first;
      std::memcpy(to + (e * n_rows + i) * cols.count * elem, from + at * elem,
                  static_cast<size_t>(cols.count * elem));
    }
  }
}

// [E, R, C] -> [ne, rows, cols]
Buffer gather(const Buffer& src, Range experts, const std::vector<int64_t>& rows, Range cols) {
  if (src.empty()) return {};
  Buffer dst(src.dtype(), {experts.count, static_cast<int64_t>(rows.size()), cols.count});
  gather_into(src, src.dim(1), src.dim(2), experts, rows, cols, dst);
  return dst;
}

// bias [E, N] -> [ne, rows]
Buffer gather_bias(const Buffer& src, Range experts, const std::vector<int64_t>& rows) {
  if (src.empty()) return {};
  Buffer dst(src.dtype(), {experts.count, static_cast<int64_t>(rows.size())});
  gather_into(src, src.dim(1), 1, experts, rows, {0, 1}, dst);
  return dst;
}

// g_idx [E, K] -> [ne, cols]
Buffer gather_g_idx(const Buffer& src, Range experts, Range cols) {
  if (src.empty()) return {};
  Buffer dst(src.dtype(), {experts.count, cols.count});
  gather_into(src, 1, src.dim(1), experts, {0}, cols, dst);
  return dst;
}

std::vector<int64_t> all_rows(int64_t n) {
  std::vector<int64_t> rows(static_cast<size_t>(n));
  std::iota(rows.begin(), rows.end(), int64_t{0});
  return rows;
}

// The w13 rows holding intermediate channels `channels` of I.
std::vector<int64_t> w13_rows(Activation a, int64_t I, Range channels) {
  std::vector<int64_t> rows;
  const int64_t end = channels.first + channels.count;
  if (a == Activation::swigluoai) {  // interleaved [g0, u0, g1, u1, ...]: pairs
    for (int64_t c = channels.first; c < end; ++c) rows.insert(rows.end(), {2 * c, 2 * c + 1});
    return rows;
  }
  for (int64_t c = channels.first; c < end; ++c) rows.push_back(c);
  if (is_gated(a))  // [gate; up]: the same channels of the up half
    for (int64_t c = channels.first; c < end; ++c) rows.push_back(I + c);
  return rows;
}

const RankShard& rank_of(const ShardPlan& plan, int rank) {
  check(rank >= 0 && rank < plan.world_size(), "rank {} is outside 0..{}", rank,
        plan.world_size() - 1);
  return plan.ranks[static_cast<size_t>(rank)];
}

}  // namespace

QuantizedExperts shard_experts(const QuantizedExperts& experts, const ShardPlan& plan, int rank) {
  const RankShard& r = rank_of(plan, rank);
  const LayerDesc& l = plan.layer;
  const QuantizedWeight& w13 = experts.w13();
  const QuantizedWeight& w2 = experts.w2();
  check(experts.num_experts() == l.num_experts && experts.hidden() == l.hidden &&
            experts.intermediate() == l.intermediate && w13.scheme == l.w13_scheme &&
            w2.scheme == l.w2_scheme && w2.K_full == 0 && experts.gated() == is_gated(l.activation),
        "these experts ({} experts, H={}, I={}, {}) are not the layer the plan was made for ({})",
        experts.num_experts(), experts.hidden(), experts.intermediate(), to_string(w13.scheme),
        l.to_string());
  const Range local{r.first_expert, r.num_experts};
  const Range channels{r.first_channel, r.intermediate};

  // w13 [E, N, H]: the rows of this rank's channels, K (= H) whole.
  const std::vector<int64_t> rows = w13_rows(l.activation, l.intermediate, channels);
  QuantizedWeight s13;
  s13.scheme = w13.scheme;
  s13.E = r.num_experts;
  s13.N = static_cast<int64_t>(rows.size());
  s13.K = w13.K;
  s13.codes = gather(w13.codes, local, rows, {0, w13.code_bytes_per_row()});
  s13.scales = gather(w13.scales, local, rows, {0, w13.groups()});
  s13.zeros = gather(w13.zeros, local, rows, {0, w13.groups()});
  s13.g_idx = gather_g_idx(w13.g_idx, local, {0, w13.K});
  s13.bias = gather_bias(w13.bias, local, rows);

  // w2 [E, H, I]: every row, this rank's K slice. 4-bit codes pack two channels per byte, and
  // the plan keeps slices even, so the slice starts and ends on a byte.
  const int64_t per_byte = w2.scheme.bits == 4 ? 2 : 1;
  const std::vector<int64_t> every_row = all_rows(w2.N);
  QuantizedWeight s2;
  s2.scheme = w2.scheme;
  s2.E = r.num_experts;
  s2.N = w2.N;
  s2.K = r.intermediate;
  s2.codes =
      gather(w2.codes, local, every_row, {r.first_channel / per_byte, r.intermediate / per_byte});
  Range groups{0, w2.groups()};  // act-order: the full-K table; channelwise: the one group
  if (!w2.scheme.act_order && w2.scheme.group_size != kChannelwise)
    groups = {r.first_channel / w2.scheme.group_size, r.intermediate / w2.scheme.group_size};
  if (w2.scheme.act_order && r.intermediate != l.intermediate) s2.K_full = l.intermediate;
  s2.scales = gather(w2.scales, local, every_row, groups);
  s2.zeros = gather(w2.zeros, local, every_row, groups);
  s2.g_idx = gather_g_idx(w2.g_idx, local, channels);
  if (r.w2_bias) s2.bias = gather_bias(w2.bias, local, every_row);
  return {std::move(s13), std::move(s2)};
}

MoEConfig shard_config(const MoEConfig& config, const ShardPlan& plan, int rank) {
  const RankShard& r = rank_of(plan, rank);
  check(config.num_experts == plan.layer.num_experts && config.hidden == plan.layer.hidden &&
            config.intermediate == plan.layer.intermediate &&
            config.activation == plan.layer.activation,
        "the config (E={}, H={}, I={}, {}) is not the layer the plan was made for ({})",
        config.num_experts, config.hidden, config.intermediate, name(config.activation),
        plan.layer.to_string());
  MoEConfig shard = config;
  shard.num_experts = r.num_experts;
  shard.intermediate = r.intermediate;
  shard.w2_bias = r.w2_bias;
  shard.routing.n_group = 0;
  shard.routing.topk_group = 0;
  shard.routing.correction_bias.clear();
  return shard;
}

LocalRouting localize_routing(const ShardPlan& plan, int rank, TensorView topk_weights,
                              TensorView topk_ids) {
  check(topk_weights.device().kind == DeviceKind::cpu && topk_ids.device().kind == DeviceKind::cpu,
        "localize_routing works on host tensors");
  check(topk_weights.dtype() == DType::f32 && topk_ids.dtype() == DType::i32 &&
            topk_weights.rank() == 2 && topk_ids.rank() == 2 &&
            topk_weights.dim(0) == topk_ids.dim(0) && topk_weights.dim(1) == topk_ids.dim(1) &&
            topk_weights.is_contiguous() && topk_ids.is_contiguous(),
        "localize_routing needs contiguous f32 topk_weights and i32 topk_ids of one shape [M, k], "
        "got {} and {}",
        topk_weights.describe(), topk_ids.describe());
  const RankShard& r = rank_of(plan, rank);
  check(!(plan.layer.apply_router_weight_on_input && plan.layer.has_bias() &&
          r.num_experts < plan.layer.num_experts),
        "router weights applied on the input of a layer with bias: a zero weight does not silence "
        "a remote expert's bias; dispatch only the tokens routed to rank {}'s experts instead",
        rank);
  const std::vector<int32_t> map = plan.expert_map(rank);
  const int64_t M = topk_ids.dim(0), k = topk_ids.dim(1);
  LocalRouting local{Buffer(DType::f32, {M, k}), Buffer(DType::i32, {M, k})};
  const float* weights = topk_weights.data_as<const float>();
  const int32_t* ids = topk_ids.data_as<const int32_t>();
  float* local_weights = local.topk_weights.data_as<float>();
  int32_t* local_ids = local.topk_ids.data_as<int32_t>();
  for (int64_t i = 0; i < M * k; ++i) {
    check(ids[i] >= 0 && ids[i] < plan.layer.num_experts,
          "topk_ids[{}, {}] = {} is not an expert id (0..{})", i / k, i % k, ids[i],
          plan.layer.num_experts - 1);
    const int32_t id = map[static_cast<size_t>(ids[i])];
    local_ids[i] = id < 0 ? 0 : id;
    local_weights[i] = id < 0 ? 0.0f : weights[i];
  }
  return local;
}

}  // namespace qmoe
