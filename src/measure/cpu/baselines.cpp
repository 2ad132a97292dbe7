#include "measure/cpu/baselines.hpp"

#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <vector>

#include "act/activation.hpp"
#include "core/convert.hpp"

extern "C" char* openblas_get_config();
extern "C" char* openblas_get_corename();

namespace qmoe::bench {

double openblas_sgemm_flops() {
  constexpr int n = 1024;
  std::vector<float> a(n * n, 0.5f), b(n * n, 0.25f), c(n * n);
  double best = 0;
  for (int r = 0; r < 4; ++r) {  // the first call also spins up OpenBLAS's threads
    const auto start = std::chrono::steady_clock::now();
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a.data(), n, b.data(), n,
                0.0f, c.data(), n);
    const double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    best = std::max(best, 2.0 * n * n * n / s);
  }
  return best;
}

std::string openblas_description() {
  return std::string(openblas_get_config()) + ", core " + openblas_get_corename();
}

void openblas_moe_forward(const DequantizedExperts& w, const MoEConfig& config,
                          const RoutedBatch& b) {
  const int64_t M = b.hidden.dim(0), k = b.topk_ids.dim(1), H = w.H, I = w.I, N1 = w.w13_rows;
  const int32_t* ids = b.topk_ids.data_as<const int32_t>();
  const float* weights = b.topk_weights.data_as<const float>();
  std::vector<std::vector<int64_t>> pairs(static_cast<size_t>(w.E));
  for (int64_t p = 0; p < M * k; ++p) pairs[ids[p]].push_back(p);
  std::vector<float> sum(static_cast<size_t>(M * H), 0.0f), x, h, a, y;
  for (int64_t e = 0; e < w.E; ++e) {
    const int64_t Me = static_cast<int64_t>(pairs[e].size());
    if (Me == 0) continue;
    x.resize(static_cast<size_t>(Me * H));
    for (int64_t r = 0; r < Me; ++r) {
      const int64_t p = pairs[e][r];
      const float scale = config.apply_router_weight_on_input ? weights[p] : 1.0f;
      for (int64_t c = 0; c < H; ++c)
        x[r * H + c] = scale * static_cast<float>(load_as_double(b.hidden.data(), b.hidden.dtype(),
                                                                 p / k * H + c));
    }
    h.resize(static_cast<size_t>(Me * N1));
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(Me), static_cast<int>(N1),
                static_cast<int>(H), 1.0f, x.data(), static_cast<int>(H),
                w.w13.data_as<float>() + e * N1 * H, static_cast<int>(H), 0.0f, h.data(),
                static_cast<int>(N1));
    if (!w.b13.empty())
      for (int64_t r = 0; r < Me; ++r)
        for (int64_t n = 0; n < N1; ++n) h[r * N1 + n] += w.b13.data_as<float>()[e * N1 + n];
    a.resize(static_cast<size_t>(Me * I));
    apply_activation(config.activation, config.activation_params, h.data(), Me, I, a.data());
    y.resize(static_cast<size_t>(Me * H));
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(Me), static_cast<int>(H),
                static_cast<int>(I), 1.0f, a.data(), static_cast<int>(I),
                w.w2.data_as<float>() + e * H * I, static_cast<int>(I), 0.0f, y.data(),
                static_cast<int>(H));
    for (int64_t r = 0; r < Me; ++r) {
      const int64_t p = pairs[e][r];
      const float scale = config.apply_router_weight_on_input ? 1.0f : weights[p];
      for (int64_t c = 0; c < H; ++c) {
        const float bias = w.b2.empty() ? 0.0f : w.b2.data_as<float>()[e * H + c];
        sum[p / k * H + c] += scale * (y[r * H + c] + bias);
      }
    }
  }
  for (int64_t i = 0; i < M * H; ++i) store_from_double(b.out.data(), b.out.dtype(), i, sum[i]);
}

}  // namespace qmoe::bench
