// The dispatch/combine form of expert parallelism: only the (token, slot) pairs routed to a
// rank's experts move there, as rows grouped by local expert (the batched-experts format), and
// their outputs come back to the token's rank, which weighs and sums them.
//
// A pair of expert e goes to every TP rank of the EP group holding e (each computes its channels'
// partial output), so a token's output is the sum over its slots and over those ranks. Rows sent
// to one rank are ordered by local expert, then token, then slot, so the receiver's grouping and
// the sender's sum are both deterministic.
#include <algorithm>
#include <cstring>
#include <vector>

#include "core/check.hpp"
#include "dist/tensor_elements.hpp"
#include "qmoe/distributed.hpp"
#include "route/routing_contract.hpp"
#include "route/topk.hpp"

namespace qmoe {

namespace {

struct Pair {
  int64_t token;
  int slot;
  int32_t local_expert;  // on the destination rank
};

}  // namespace

void ShardedMoE::forward_dispatch(TensorView hidden, TensorView router_logits,
                                  TensorView out) const {
  const int64_t n = hidden.dim(0), H = config_.hidden, E = config_.num_experts;
  const int k = config_.top_k(), world = comm_->size(), tp = plan_.spec.tp_size;
  for (const auto& [t, what, cols] :
       {std::tuple{&hidden, "hidden", H}, {&router_logits, "router_logits", E}, {&out, "out", H}})
    check(t->device().kind == DeviceKind::cpu && t->is_contiguous() && t->rank() == 2 &&
              t->dim(0) == n && t->dim(1) == cols,
          "ShardedMoE::forward_dispatch (rank {}): {} is {}, expected contiguous host [{}, {}]; "
          "the dispatch form runs on host ranks (CUDA ranks: forward or forward_token_split)",
          rank(), what, t->describe(), n, cols);
  check(router_logits.dtype() == DType::f32 && out.dtype() == hidden.dtype() &&
            (hidden.dtype() == DType::f32 || hidden.dtype() == DType::bf16 ||
             hidden.dtype() == DType::f16),
        "ShardedMoE::forward_dispatch: hidden and out f32/bf16/f16 of one dtype and f32 logits, "
        "got {}, {} and {}",
        hidden.describe(), out.describe(), router_logits.describe());
  check_router_logits(router_logits.data_as<float>(), n, E);
  std::vector<float> weights(size_t(n * k));
  std::vector<int32_t> ids(size_t(n * k));
  route_topk(config_.routing, router_logits.data_as<float>(), n, E, weights.data(), ids.data());

  // Which ranks hold expert e, and its id there.
  std::vector<int> owner(static_cast<size_t>(E));
  for (int ep = 0; ep < plan_.spec.ep_size; ++ep) {
    const RankShard& r = plan_.ranks[size_t(ep * tp)];
    for (int64_t e = r.first_expert; e < r.first_expert + r.num_experts; ++e) owner[size_t(e)] = ep;
  }
  std::vector<std::vector<Pair>> to(static_cast<size_t>(world));
  for (int64_t m = 0; m < n; ++m)
    for (int j = 0; j < k; ++j) {
      const int32_t e = ids[size_t(m * k + j)];
      const int ep = owner[size_t(e)];
      const auto local = int32_t(e - plan_.ranks[size_t(ep * tp)].first_expert);
      for (int t = 0; t < tp; ++t) to[size_t(ep * tp + t)].push_back({m, j, local});
    }
  std::vector<int64_t> send_rows(static_cast<size_t>(world));
  int64_t sent = 0;
  for (int d = 0; d < world; ++d) {
    std::stable_sort(to[size_t(d)].begin(), to[size_t(d)].end(),
                     [](const Pair& a, const Pair& b) { return a.local_expert < b.local_expert; });
    send_rows[size_t(d)] = int64_t(to[size_t(d)].size());
    sent += send_rows[size_t(d)];
  }

  // Rows out: the token's hidden row (times its weight when the layer weighs inputs), and the
  // local expert it goes to.
  const DType dtype = hidden.dtype();
  const size_t row_bytes = size_t(H) * size_of(dtype);
  Buffer send_x(dtype, {sent, H}), send_expert(DType::i32, {sent, 1});
  int64_t row = 0;
  for (const std::vector<Pair>& pairs : to)
    for (const Pair& p : pairs) {
      const TensorView dst = send_x.view();
      if (config_.apply_router_weight_on_input) {
        const float w = weights[size_t(p.token * k + p.slot)];
        for (int64_t c = 0; c < H; ++c) store(dst, row * H + c, w * load(hidden, p.token * H + c));
      } else {
        std::memcpy(static_cast<std::byte*>(send_x.data()) + size_t(row) * row_bytes,
                    static_cast<const std::byte*>(hidden.data()) + size_t(p.token) * row_bytes,
                    row_bytes);
      }
      send_expert.data_as<int32_t>()[row++] = p.local_expert;
    }
  const std::vector<int64_t> recv_rows = comm_->exchange_counts(send_rows);
  int64_t received = 0;
  for (int64_t r : recv_rows) received += r;
  Buffer recv_x(dtype, {received, H}), recv_expert(DType::i32, {received, 1});
  comm_->all_to_all(send_x.view(), send_rows, recv_x.view(), recv_rows);
  comm_->all_to_all(send_expert.view(), send_rows, recv_expert.view(), recv_rows);

  // The received rows as the batched-experts format [E_local, T_max, H], run, and back in order.
  const int64_t local_experts = local_.config().num_experts;
  std::vector<int32_t> count(size_t(local_experts), 0);
  std::vector<int64_t> slot_of_row(static_cast<size_t>(received));
  for (int64_t r = 0; r < received; ++r) {
    const int32_t e = recv_expert.data_as<int32_t>()[r];
    check(e >= 0 && e < local_experts, "ShardedMoE::forward_dispatch: received expert {} of {}", e,
          local_experts);
    slot_of_row[size_t(r)] = count[size_t(e)]++;
  }
  const int64_t t_max = std::max<int64_t>(1, *std::max_element(count.begin(), count.end()));
  Buffer batched_x(dtype, {local_experts, t_max, H}), batched_y(dtype, {local_experts, t_max, H});
  auto batched_row = [&](const Buffer& b, int64_t r) {
    const int32_t e = recv_expert.data_as<int32_t>()[r];
    return static_cast<std::byte*>(const_cast<void*>(b.data())) +
           size_t(e * t_max + slot_of_row[size_t(r)]) * row_bytes;
  };
  for (int64_t r = 0; r < received; ++r)
    std::memcpy(batched_row(batched_x, r),
                static_cast<const std::byte*>(recv_x.data()) + size_t(r) * row_bytes, row_bytes);
  local_.forward_batched(batched_x.view(), TensorView(count.data(), DType::i32, {local_experts}),
                         batched_y.view());
  for (int64_t r = 0; r < received; ++r)
    std::memcpy(static_cast<std::byte*>(recv_x.data()) + size_t(r) * row_bytes,
                batched_row(batched_y, r), row_bytes);
  Buffer back(dtype, {sent, H});
  comm_->all_to_all(recv_x.view(), recv_rows, back.view(), send_rows);

  // Combine: each token sums its slots' rows from every rank that computed them, in f32.
  std::vector<float> sum(size_t(n * H), 0.0f);
  row = 0;
  for (const std::vector<Pair>& pairs : to)
    for (const Pair& p : pairs) {
      const float w =
          config_.apply_router_weight_on_input ? 1.0f : weights[size_t(p.token * k + p.slot)];
      for (int64_t c = 0; c < H; ++c)
        sum[size_t(p.token * H + c)] += w * load(back.view(), row * H + c);
      ++row;
    }
  for (int64_t i = 0; i < n * H; ++i) store(out, i, sum[size_t(i)]);
}

}  // namespace qmoe
