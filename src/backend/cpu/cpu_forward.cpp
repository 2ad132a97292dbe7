// One MoE forward on packed weights, as parallel loops over flat work lists:
//   1. GEMM1 input rows: one row per (token, slot) pair, rows grouped by expert
//   2. GEMM1 + bias + activation, items = (active expert, run of w13 panels)
//   3. GEMM2 + bias, items = (active expert, run of w2 panels)
//   4. weighted sum over the k slots of each token, in slot order (so results do not depend on
//      the thread count), converted to the output dtype
// The batched-experts format runs the same steps 1-3 on rows grouped by their counts (each row
// of x is a token with one slot), then step 4 is a copy of each row into out.
// Items are runs of 32-row panels rather than experts, so a decode step with 8 active experts
// still spreads over every core, and each item streams its panels once for all the expert's
// tokens.
#include <algorithm>
#include <array>
#include <cstring>
#include <span>
#include <type_traits>

#include "act/activation.hpp"
#include "backend/cpu/cpu_experts.hpp"
#include "backend/cpu/thread_pool.hpp"
#include "core/check.hpp"

namespace qmoe::cpu {

namespace {

// What GEMM1 reads: token rows, the expert of each (token, slot) pair and, when the router weight
// is folded into GEMM1's input, the weights.
struct GemmInput {
  TensorView hidden;  // [tokens, H]
  int64_t k = 1;
  const int32_t* ids = nullptr;  // [tokens * k]; nullptr: pair p is expert p / rows_per_expert's
  int64_t rows_per_expert = 0;
  const float* input_weights = nullptr;  // [tokens * k], or nullptr: no weight folded in
  // Tokens without a row (the padding of a batched x): inputs are made per row, never per token.
  bool sparse_tokens = false;

  int32_t expert_of(int64_t pair) const {
    return ids ? ids[pair] : static_cast<int32_t>(pair / rows_per_expert);
  }
};

struct Item {
  int32_t expert;
  int32_t first_panel, end_panel;  // panel q = output rows [32q, 32q + 32) in slot order
};

float to_f32(const void* base, DType t, int64_t i) {
  switch (t) {
    case DType::f16: return to_float(static_cast<const half_t*>(base)[i]);
    case DType::bf16: return to_float(static_cast<const bf16_t*>(base)[i]);
    default: return static_cast<const float*>(base)[i];
  }
}

void store_row(void* base, DType t, int64_t offset, const float* v, int64_t n) {
  switch (t) {
    case DType::f16: {
      half_t* out = static_cast<half_t*>(base) + offset;
      for (int64_t i = 0; i < n; ++i) out[i] = to_half(v[i]);
      return;
    }
    case DType::bf16: {
      bf16_t* out = static_cast<bf16_t*>(base) + offset;
      for (int64_t i = 0; i < n; ++i) out[i] = to_bf16(v[i]);
      return;
    }
    default: std::memcpy(static_cast<float*>(base) + offset, v, n * sizeof(float));
  }
}

// body(row) for rows 0..rows-1 of `width` elements each: in parallel when there is enough work
// to pay for a barrier (about 64K elements), serially otherwise (a decode step's 8 rows).
template <class Body>
void for_rows(int64_t rows, int64_t width, Body&& body) {
  if (rows * width < (int64_t{1} << 16)) {
    for (int64_t r = 0; r < rows; ++r) body(r);
    return;
  }
  ThreadPool::instance().parallel_for(rows, body);
}

// Counting sort of the (token, slot) pairs by expert.
void group_by_expert(const int32_t* ids, int64_t M, int64_t k, int64_t E, Workspace& ws) {
  const int64_t pairs = M * k;
  ws.expert_begin.assign(static_cast<size_t>(E + 1), 0);
  for (int64_t p = 0; p < pairs; ++p) {
    check(ids[p] >= 0 && ids[p] < E, "topk_ids[{}, {}] = {} is not an expert id (0..{})", p / k,
          p % k, ids[p], E - 1);
    ++ws.expert_begin[ids[p] + 1];
  }
  for (int64_t e = 0; e < E; ++e) ws.expert_begin[e + 1] += ws.expert_begin[e];
  ws.row_of_pair.resize(static_cast<size_t>(pairs));
  ws.pair_of_row.resize(static_cast<size_t>(pairs));
  std::vector<int64_t> next(ws.expert_begin.begin(), ws.expert_begin.end() - 1);
  for (int64_t p = 0; p < pairs; ++p) {
    const int64_t row = next[ids[p]]++;
    ws.row_of_pair[p] = static_cast<int32_t>(row);
    ws.pair_of_row[row] = static_cast<int32_t>(p);
  }
}

// An item covers consecutive panels of one expert: consecutive in memory, so each thread
// reads long runs (kItemBytes) whose start the prefetch of its previous run does not cover
// (the other thread took the run in between), while there are still several items per thread to
// balance the load. Measured on a noisy VM (read ceiling 23-65 GB/s from row to row), so only
// roughly: 128 KB looked better than 64 KB for Qwen3 M=1 (35 KB panels) and 256 KB no better;
// prefetching each item's first 16 KB up front made no visible difference.
constexpr int64_t kItemBytes = 128 << 10;

std::vector<Item> items_for(const Workspace& ws, const PackedMatrix& w) {
  const int64_t panels = w.panels, panel_bytes = w.format.panel_bytes();
  int64_t active = 0;
  for (int64_t e = 0; e < w.E; ++e) active += ws.expert_begin[e] < ws.expert_begin[e + 1];
  const int64_t threads = ThreadPool::instance().threads();
  const int64_t per_item = std::clamp<int64_t>(
      kItemBytes / panel_bytes, 1, std::max<int64_t>(1, active * panels / (4 * threads)));
  std::vector<Item> items;
  for (int64_t e = 0; e < w.E; ++e) {
    if (ws.expert_begin[e] == ws.expert_begin[e + 1]) continue;
    for (int64_t q = 0; q < panels; q += per_item)
      items.push_back({static_cast<int32_t>(e), static_cast<int32_t>(q),
                       static_cast<int32_t>(std::min(panels, q + per_item))});
  }
  return items;
}

// Runs the tile kernel over all rows of expert e for panel q, at most `max_tokens` rows per
// call: run(first_row, tokens, tile) fills the [tokens, 32] tile, epilogue(first_row, tokens,
// tile) consumes it.
template <class Run, class Epilogue>
void for_each_tile(const Workspace& ws, int64_t e, int max_tokens, Run&& run, Epilogue&& epilogue) {
  alignas(64) float tile[kMaxTileTokens * kTileRows];
  // As few calls as max_tokens allows, with token counts as even as possible: 9 rows at 8 per
  // call run as 5 + 4, not 8 + 1 (a 1-token call does a full dequantization for one token).
  const int64_t end = ws.expert_begin[e + 1];
  int64_t calls = (end - ws.expert_begin[e] + max_tokens - 1) / max_tokens;
  for (int64_t row = ws.expert_begin[e]; row < end; --calls) {
    const int tokens = static_cast<int>((end - row + calls - 1) / calls);
    run(row, tokens, static_cast<float*>(tile));
    epilogue(row, tokens, static_cast<const float*>(tile));
    row += tokens;
  }
}

// The tile kernel over expert e's rows for panel q, with activation rows of type X (float, or
// bf16 bit patterns for the kernel's bf16 path) and their sums over each group.
template <class X, class Epilogue>
void for_each_panel_tile(const CpuExperts& x, const PackedMatrix& w, const Workspace& ws,
                         const X* const* inputs, const float* const* sums, int64_t e, int64_t q,
                         Epilogue&& epilogue) {
  constexpr bool kBf16 = std::is_same_v<X, uint16_t>;
  auto run = [&](int64_t row, int tokens, float* tile) {
    const PanelTileOf<X> t{w.panel(e, q), inputs + row, sums + row, tokens, tile};
    if constexpr (kBf16) {
      x.kernel.run_bf16(w.format, t);
    } else {
      x.kernel.run(w.format, t);
    }
  };
  for_each_tile(ws, e, kBf16 ? x.kernel.max_tokens_bf16 : x.kernel.max_tokens, run, epilogue);
}

// GEMM1 reads bf16 activations directly when the kernel has a bf16 path, the input is bf16 and
// no router weight has to be folded into it (that product would round).
bool gemm1_in_bf16(const CpuExperts& x, const GemmInput& in) {
  return x.kernel.run_bf16 && in.hidden.dtype() == DType::bf16 && !in.input_weights &&
         x.w13.format.group_k % 2 == 0;
}

// GEMM2 reads the activations in bf16 when the layer's dtype is bf16 and the kernel has a bf16
// path: the intermediate is rounded to bf16 once, as a bf16 model does (vLLM keeps it in the
// activation dtype too), and GEMM2 then runs at the bf16 dot-product rate.
bool gemm2_in_bf16(const CpuExperts& x, DType dtype) {
  return x.kernel.run_bf16 && dtype == DType::bf16 && x.w2.format.group_k % 2 == 0;
}

float value_of(float v) { return v; }
float value_of(uint16_t bf16_bits) { return to_float(bf16_t{bf16_bits}); }

// sums[g] = the sum of row[c] over group g's G columns: what the kernels subtract the zero point
// with (panel_format.hpp).
template <class X>
void row_group_sums(const X* row, int64_t groups, int64_t G, float* sums) {
  for (int64_t g = 0; g < groups; ++g) {
    float sum = 0.0f;
    for (int64_t c = g * G; c < (g + 1) * G; ++c) sum += value_of(row[c]);
    sums[g] = sum;
  }
}

// Rows of bf16 GEMM1 input (the hidden rows themselves, or act-order permutations of them) and
// their sums over each w13 group.
void prepare_bf16_inputs(const CpuExperts& x, const GemmInput& in, Workspace& ws) {
  const int64_t H = x.H, k = in.k, rows = ws.expert_begin[x.E];
  const int64_t groups = x.w13.format.groups, G = x.w13.format.group_k;
  const uint16_t* hidden = in.hidden.data_as<const uint16_t>();
  const bool permuted = !x.w13.k_order.empty(), by_row = permuted || in.sparse_tokens;
  const int64_t distinct = by_row ? rows : in.hidden.dim(0);  // rows with their own values
  const auto token_of = [&](int64_t d) { return by_row ? ws.pair_of_row[d] / k : d; };
  ws.x_rows_bf16.resize(static_cast<size_t>(rows));
  ws.group_sum_rows.resize(static_cast<size_t>(rows));
  ws.group_sum.resize(static_cast<size_t>(distinct * groups));
  if (permuted) ws.x_bf16.resize(static_cast<size_t>(rows * H));
  for_rows(distinct, H, [&](int64_t d) {
    const uint16_t* row = hidden + token_of(d) * H;
    if (permuted) {
      const int32_t* order = x.w13.k_order_of(in.expert_of(ws.pair_of_row[d]));
      uint16_t* dst = ws.x_bf16.data() + d * H;
      for (int64_t c = 0; c < H; ++c) dst[c] = row[order[c]];
      row = dst;
    }
    row_group_sums(row, groups, G, ws.group_sum.data() + d * groups);
  });
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t d = by_row ? r : ws.pair_of_row[r] / k;
    ws.x_rows_bf16[r] = permuted ? ws.x_bf16.data() + r * H : hidden + token_of(d) * H;
    ws.group_sum_rows[r] = ws.group_sum.data() + d * groups;
  }
}

// GEMM1's f32 input rows: the hidden rows themselves when they are f32 and every slot of a token
// reads the same values, else converted (and, per (token, slot) pair, permuted to act order or
// scaled by the router weight) into ws.x; with their sums over each w13 group.
void prepare_inputs(const CpuExperts& x, const GemmInput& in, Workspace& ws) {
  if (gemm1_in_bf16(x, in)) return prepare_bf16_inputs(x, in, ws);
  const int64_t H = x.H, k = in.k, rows = ws.expert_begin[x.E];
  const int64_t groups = x.w13.format.groups, G = x.w13.format.group_k;
  const DType dtype = in.hidden.dtype();
  const bool per_pair = !x.w13.k_order.empty() || in.input_weights;
  const bool in_place = !per_pair && dtype == DType::f32, by_row = per_pair || in.sparse_tokens;
  const int64_t distinct = by_row ? rows : in.hidden.dim(0);  // rows with their own values
  const auto token_of = [&](int64_t d) { return by_row ? ws.pair_of_row[d] / k : d; };
  if (!in_place) ws.x.resize(static_cast<size_t>(distinct * H));
  const auto row_of = [&](int64_t d) {
    return in_place ? in.hidden.data_as<const float>() + token_of(d) * H : ws.x.data() + d * H;
  };
  ws.group_sum.resize(static_cast<size_t>(distinct * groups));
  for_rows(distinct, H, [&](int64_t d) {
    if (!in_place) {
      const int64_t pair = by_row ? ws.pair_of_row[d] : d * k;
      const int32_t* order = x.w13.k_order_of(in.expert_of(pair));
      const float scale = in.input_weights ? in.input_weights[pair] : 1.0f;
      float* dst = ws.x.data() + d * H;
      for (int64_t c = 0; c < H; ++c)
        dst[c] = scale * to_f32(in.hidden.data(), dtype, pair / k * H + (order ? order[c] : c));
    }
    row_group_sums(row_of(d), groups, G, ws.group_sum.data() + d * groups);
  });
  ws.x_rows.resize(static_cast<size_t>(rows));
  ws.group_sum_rows.resize(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t d = by_row ? r : ws.pair_of_row[r] / k;
    ws.x_rows[r] = row_of(d);
    ws.group_sum_rows[r] = ws.group_sum.data() + d * groups;
  }
}

// GEMM1 for panel q of expert e, then bias and activation into the GEMM2 input rows.
void gemm1_panel(const CpuExperts& x, const MoEConfig& config, bool bf16, bool act_bf16,
                 Workspace& ws, int64_t e, int64_t q) {
  const int64_t I = x.I;
  const float* bias = x.w13.bias_of(e);
  const int32_t* position = x.w2_position.empty() ? nullptr : x.w2_position.data() + e * I;
  // Gated: tile columns 0..15 are the gates of outputs j = 16q + c, columns 16..31 their ups.
  const int64_t outputs = x.gated ? kHalfRows : kTileRows;
  const int64_t first = q * outputs, count = std::min(outputs, I - first);
  auto epilogue = [&](int64_t row, int tokens, const float* tile) {
    for (int t = 0; t < tokens; ++t) {
      const float* h = tile + t * kTileRows;
      for (int64_t c = 0; c < count; ++c) {
        std::array<float, 2> in{h[c], x.gated ? h[kHalfRows + c] : 0.0f};
        if (bias) {
          in[0] += bias[q * kTileRows + c];
          if (x.gated) in[1] += bias[q * kTileRows + kHalfRows + c];
        }
        const int64_t j = first + c, at = (row + t) * I + (position ? position[j] : j);
        const float a = activation_at(config.activation, config.activation_params, in.data(), 1, 0);
        if (act_bf16) {
          ws.act_bf16[at] = to_bf16(a).bits;
        } else {
          ws.act[at] = a;
        }
      }
    }
  };
  if (!bf16)
    return for_each_panel_tile(x, x.w13, ws, ws.x_rows.data(), ws.group_sum_rows.data(), e, q,
                               epilogue);
  for_each_panel_tile(x, x.w13, ws, ws.x_rows_bf16.data(), ws.group_sum_rows.data(), e, q,
                      epilogue);
}

// GEMM2 for panel q of expert e, plus bias, into the per-row outputs.
void gemm2_panel(const CpuExperts& x, bool bf16, Workspace& ws, int64_t e, int64_t q) {
  const int64_t H = x.H;
  const float* bias = x.w2.bias_of(e);
  const int64_t first = q * kTileRows, count = std::min<int64_t>(kTileRows, H - first);
  auto epilogue = [&](int64_t row, int tokens, const float* tile) {
    for (int t = 0; t < tokens; ++t) {
      float* out = ws.y.data() + (row + t) * H + first;
      const float* y = tile + t * kTileRows;
      for (int64_t c = 0; c < count; ++c) out[c] = y[c] + (bias ? bias[first + c] : 0.0f);
    }
  };
  if (!bf16)
    return for_each_panel_tile(x, x.w2, ws, ws.act_rows.data(), ws.act_group_sum_rows.data(), e, q,
                               epilogue);
  for_each_panel_tile(x, x.w2, ws, ws.act_rows_bf16.data(), ws.act_group_sum_rows.data(), e, q,
                      epilogue);
}

void gemm1_and_activation(const CpuExperts& x, const MoEConfig& config, bool bf16, bool act_bf16,
                          Workspace& ws) {
  const size_t size = static_cast<size_t>(ws.expert_begin[x.E] * x.I);
  if (act_bf16) {
    ws.act_bf16.resize(size);
  } else {
    ws.act.resize(size);
  }
  const std::vector<Item> items = items_for(ws, x.w13);
  ThreadPool::instance().parallel_for(static_cast<int64_t>(items.size()), [&](int64_t i) {
    for (int64_t q = items[i].first_panel; q < items[i].end_panel; ++q)
      gemm1_panel(x, config, bf16, act_bf16, ws, items[i].expert, q);
  });
}

// Row pointers of GEMM2's input (the activations, f32 or bf16) and their sums over each w2
// group.
template <class X>
void prepare_activations(const CpuExperts& x, const std::vector<X>& act,
                         std::vector<const X*>& act_rows, Workspace& ws) {
  const int64_t rows = ws.expert_begin[x.E], I = x.I;
  const int64_t groups = x.w2.format.groups, G = x.w2.format.group_k;
  act_rows.resize(static_cast<size_t>(rows));
  ws.act_group_sum_rows.resize(static_cast<size_t>(rows));
  ws.act_group_sum.resize(static_cast<size_t>(rows * groups));
  for_rows(rows, I, [&](int64_t r) {
    act_rows[r] = act.data() + r * I;
    ws.act_group_sum_rows[r] = ws.act_group_sum.data() + r * groups;
    row_group_sums(act_rows[r], groups, G, ws.act_group_sum.data() + r * groups);
  });
}

void gemm2(const CpuExperts& x, bool bf16, Workspace& ws) {
  ws.y.resize(static_cast<size_t>(ws.expert_begin[x.E] * x.H));
  if (bf16) {
    prepare_activations(x, ws.act_bf16, ws.act_rows_bf16, ws);
  } else {
    prepare_activations(x, ws.act, ws.act_rows, ws);
  }
  const std::vector<Item> items = items_for(ws, x.w2);
  ThreadPool::instance().parallel_for(static_cast<int64_t>(items.size()), [&](int64_t i) {
    for (int64_t q = items[i].first_panel; q < items[i].end_panel; ++q)
      gemm2_panel(x, bf16, ws, items[i].expert, q);
  });
}

void combine(const CpuExperts& x, const MoEConfig& config, const RoutedBatch& b,
             const Workspace& ws) {
  const int64_t H = x.H, M = b.hidden.dim(0), k = b.topk_ids.dim(1);
  const float* weights = b.topk_weights.data_as<const float>();
  for_rows(M, H * k, [&](int64_t m) {
    std::vector<float> sum(static_cast<size_t>(H), 0.0f);
    for (int64_t j = 0; j < k; ++j) {
      const float w = config.apply_router_weight_on_input ? 1.0f : weights[m * k + j];
      const float* y = ws.y.data() + ws.row_of_pair[m * k + j] * H;
      for (int64_t c = 0; c < H; ++c) sum[c] += w * y[c];
    }
    store_row(b.out.data(), b.out.dtype(), m * H, sum.data(), H);
  });
}

// Rows of x [E, T_max, H] grouped by expert: expert e's are its first counts[e] rows.
void group_by_counts(std::span<const int32_t> counts, int64_t T_max, Workspace& ws) {
  const auto E = static_cast<int64_t>(counts.size());
  ws.expert_begin.assign(static_cast<size_t>(E + 1), 0);
  for (int64_t e = 0; e < E; ++e) ws.expert_begin[e + 1] = ws.expert_begin[e] + counts[e];
  ws.pair_of_row.resize(static_cast<size_t>(ws.expert_begin[E]));
  for (int64_t e = 0; e < E; ++e)
    for (int64_t t = 0; t < counts[e]; ++t)
      ws.pair_of_row[ws.expert_begin[e] + t] = static_cast<int32_t>(e * T_max + t);
}

// Steps 1-3 on rows grouped in ws: ws.y holds each row's expert output.
void expert_rows(const CpuExperts& x, const MoEConfig& config, const GemmInput& in, Workspace& ws) {
  prepare_inputs(x, in, ws);
  const bool act_bf16 = gemm2_in_bf16(x, in.hidden.dtype());
  gemm1_and_activation(x, config, gemm1_in_bf16(x, in), act_bf16, ws);
  gemm2(x, act_bf16, ws);
}

void forward_with(const CpuExperts& x, const MoEConfig& config, const RoutedBatch& b,
                  Workspace& ws) {
  const int32_t* ids = b.topk_ids.data_as<const int32_t>();
  group_by_expert(ids, b.topk_ids.dim(0), b.topk_ids.dim(1), x.E, ws);
  const float* input_weights =
      config.apply_router_weight_on_input ? b.topk_weights.data_as<const float>() : nullptr;
  expert_rows(x, config, {b.hidden, b.topk_ids.dim(1), ids, 0, input_weights, false}, ws);
  combine(x, config, b, ws);
}

void batched_with(const CpuExperts& x, const MoEConfig& config, const BatchedBatch& b,
                  Workspace& ws) {
  const int64_t T_max = b.x.dim(1), H = x.H;
  group_by_counts(checked_host_counts("cpu", b), T_max, ws);
  const TensorView tokens(b.x.data(), b.x.dtype(), {x.E * T_max, H});
  expert_rows(x, config, {tokens, 1, nullptr, T_max, nullptr, true}, ws);
  for_rows(ws.expert_begin[x.E], H, [&](int64_t r) {
    store_row(b.out.data(), b.out.dtype(), ws.pair_of_row[r] * H, ws.y.data() + r * H, H);
  });
}

// f(workspace): the layer's own workspace, or one of this call's while another thread runs a
// forward on these weights.
template <class F>
void with_workspace(const CpuExperts& experts, F&& f) {
  std::unique_lock lock(experts.workspace_mutex, std::try_to_lock);
  if (lock.owns_lock()) return f(experts.workspace);
  Workspace own;
  f(own);
}

}  // namespace

void cpu_forward(const CpuExperts& experts, const MoEConfig& config, const RoutedBatch& batch) {
  check(batch.hidden.device().kind == DeviceKind::cpu,
        "backend 'cpu' needs host tensors, hidden is on {}", to_string(batch.hidden.device()));
  with_workspace(experts, [&](Workspace& ws) { forward_with(experts, config, batch, ws); });
}

void cpu_forward_batched(const CpuExperts& experts, const MoEConfig& config,
                         const BatchedBatch& batch) {
  check(batch.x.device().kind == DeviceKind::cpu, "backend 'cpu' needs host tensors, x is on {}",
        to_string(batch.x.device()));
  with_workspace(experts, [&](Workspace& ws) { batched_with(experts, config, batch, ws); });
}

}  // namespace qmoe::cpu
