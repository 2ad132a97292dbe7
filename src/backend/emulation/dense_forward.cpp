#include "backend/emulation/dense_forward.hpp"

#include <vector>

#include "act/activation.hpp"
#include "core/convert.hpp"
#include "quant/mxfp4.hpp"

namespace qmoe {

Buffer dequantize_weight(const QuantizedWeight& q) {
  Buffer w(DType::f32, {q.E, q.N, q.K});
  float* out = w.data_as<float>();
  for (int64_t e = 0; e < q.E; ++e)
    for (int64_t n = 0; n < q.N; ++n)
      for (int64_t k = 0; k < q.K; ++k) *out++ = q.dequant(e, n, k);
  return w;
}

namespace {

// y[n] = sum_k W[n, k] x[k] (+ b[n]), W row-major [N, K].
template <class Acc>
void matvec(const float* W, const float* b, const Acc* x, int64_t N, int64_t K, Acc* y) {
  for (int64_t n = 0; n < N; ++n) {
    const float* row = W + n * K;
    Acc sum = b ? Acc(b[n]) : Acc(0);
    for (int64_t k = 0; k < K; ++k) sum += Acc(row[k]) * x[k];
    y[n] = sum;
  }
}

template <class Acc>
void quantize_input(ActivationQuant q, std::vector<Acc>& x) {
  if (q != ActivationQuant::none) mxfp4_quantize_dequantize(std::span<Acc>(x), q);
}

}  // namespace

DequantizedExperts dequantize(const QuantizedExperts& experts) {
  DequantizedExperts d;
  d.E = experts.num_experts();
  d.H = experts.hidden();
  d.I = experts.intermediate();
  d.w13_rows = experts.w13().N;
  d.w13 = dequantize_weight(experts.w13());
  d.w2 = dequantize_weight(experts.w2());
  if (experts.w13().has_bias()) d.b13 = experts.w13().bias.clone();
  if (experts.w2().has_bias()) d.b2 = experts.w2().bias.clone();
  d.w13_input = experts.w13().scheme.activation_quant;
  d.w2_input = experts.w2().scheme.activation_quant;
  return d;
}

// One row through expert e: y = W2 act(W13 x + b13) + b2 (x quantized first under W4A4, so
// it is overwritten). h and a are scratch rows of w13_rows and I.
template <class Acc>
void expert_mlp(const DequantizedExperts& w, const MoEConfig& config, int64_t e,
                std::vector<Acc>& x, std::vector<Acc>& h, std::vector<Acc>& a,
                std::vector<Acc>& y) {
  const int64_t H = w.H, I = w.I;
  quantize_input(w.w13_input, x);
  matvec(w.w13.data_as<float>() + e * w.w13_rows * H,
         w.b13.empty() ? nullptr : w.b13.data_as<float>() + e * w.w13_rows, x.data(), w.w13_rows, H,
         h.data());
  apply_activation(config.activation, config.activation_params, h.data(), 1, I, a.data());
  quantize_input(w.w2_input, a);
  matvec(w.w2.data_as<float>() + e * H * I, w.b2.empty() ? nullptr : w.b2.data_as<float>() + e * H,
         a.data(), H, I, y.data());
}

template <class Acc>
void dense_moe_forward(const DequantizedExperts& w, const MoEConfig& config,
                       const RoutedBatch& batch) {
  const int64_t M = batch.hidden.dim(0), H = w.H, k = batch.topk_ids.dim(1);
  const float* weights = batch.topk_weights.data_as<const float>();
  const int32_t* ids = batch.topk_ids.data_as<const int32_t>();
  std::vector<Acc> x(H), h(w.w13_rows), a(w.I), y(H), sum(H);
  for (int64_t m = 0; m < M; ++m) {
    std::fill(sum.begin(), sum.end(), Acc(0));
    for (int64_t j = 0; j < k; ++j) {
      const int32_t e = ids[m * k + j];
      check(e >= 0 && e < w.E, "topk_ids[{}, {}] = {} is not an expert id (0..{})", m, j, e,
            w.E - 1);
      const Acc weight = Acc(weights[m * k + j]);
      for (int64_t c = 0; c < H; ++c) {
        x[c] = Acc(load_as_double(batch.hidden.data(), batch.hidden.dtype(), m * H + c));
        if (config.apply_router_weight_on_input) x[c] *= weight;
      }
      expert_mlp(w, config, e, x, h, a, y);
      const Acc scale = config.apply_router_weight_on_input ? Acc(1) : weight;
      for (int64_t c = 0; c < H; ++c) sum[c] += scale * y[c];
    }
    for (int64_t c = 0; c < H; ++c)
      store_from_double(batch.out.data(), batch.out.dtype(), m * H + c, double(sum[c]));
  }
}

void dense_batched_forward(const DequantizedExperts& w, const MoEConfig& config,
                           const BatchedBatch& batch) {
  const std::span<const int32_t> counts = checked_host_counts("emulation", batch);
  const int64_t T_max = batch.x.dim(1), H = w.H;
  std::vector<float> x(H), h(w.w13_rows), a(w.I), y(H);
  for (int64_t e = 0; e < w.E; ++e) {
    for (int64_t t = 0; t < counts[e]; ++t) {
      const int64_t row = (e * T_max + t) * H;
      for (int64_t c = 0; c < H; ++c)
        x[c] = float(load_as_double(batch.x.data(), batch.x.dtype(), row + c));
      expert_mlp(w, config, e, x, h, a, y);
      for (int64_t c = 0; c < H; ++c)
        store_from_double(batch.out.data(), batch.out.dtype(), row + c, double(y[c]));
    }
  }
}

template void dense_moe_forward<float>(const DequantizedExperts&, const MoEConfig&,
                                       const RoutedBatch&);
template void dense_moe_forward<double>(const DequantizedExperts&, const MoEConfig&,
                                        const RoutedBatch&);

}  // namespace qmoe
