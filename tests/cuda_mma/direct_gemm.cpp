#include "direct_gemm.hpp"

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "core/convert.hpp"
#include "cuda/gpu_test.hpp"

namespace qmoe::test {

using namespace cuda_mma;

namespace {
constexpr int kTopK = 2;  // pairs per token when the rows are tokens
}

DirectGemm::DirectGemm(const DirectGemmSpec& spec)
    : spec_(spec),
      rng_(0x5eed + uint64_t(spec.N) * 31 + uint64_t(spec.K) + uint64_t(spec.tile)),
      weight_(
          random_weight(spec.expert_rows.empty() ? spec.experts : int64_t(spec.expert_rows.size()),
                        spec.N, spec.K, spec.scheme, true, rng_)),
      packed_(spec.fused ? pack_weight(weight_, "w13", gated_row_order(spec.N / 2, false))
                         : pack_weight(weight_, "w")) {
  codes_ = to_device(packed_.codes);
  scales_ = to_device(packed_.scale_pairs);
  zeros_ = to_device(packed_.zero_pairs);
  bias_ = to_device(packed_.bias);
  PackedWeightView view = packed_.shape;
  view.codes = codes_.data();
  view.scale_pairs = scales_.as<uint32_t>();
  view.zero_pairs = packed_.zero_pairs.empty() ? nullptr : zeros_.as<uint16_t>();
  view.bias = bias_.as<float>();

  const int tile = spec.tile;
  auto add_tile = [&](int64_t e, int rows) {
    tile_experts_.push_back(int32_t(e));
    for (int i = 0; i < tile; ++i) {
      const bool real = e >= 0 && i < rows;
      sorted_pairs_.push_back(real ? pairs_++ : -1);
      row_expert_.push_back(real ? e : -1);
    }
  };
  const int64_t experts = weight_.E;
  for (int64_t e = 0; e < experts; ++e) {
    if (e == 2) add_tile(-1, 0);
    int rows = int(rng_() % uint64_t(2 * tile - 2));
    if (e == experts - 1) rows = std::max(rows, 1);
    if (!spec.expert_rows.empty()) rows = spec.expert_rows[size_t(e)];
    for (int t = 0; t * tile < rows; ++t) add_tile(e, std::min(tile, rows - t * tile));
  }
  for (int32_t& p : sorted_pairs_)
    if (p < 0) p = pairs_;  // padding rows: ids past the last pair
  const int64_t padded = int64_t(sorted_pairs_.size());
  const std::vector<int32_t> padded_total{int32_t(padded)};
  // Activation row of sorted row r: the pair's token, or r itself.
  const int64_t a_rows = spec.fused ? (pairs_ + kTopK - 1) / kTopK : padded;
  router_.resize(size_t(pairs_));
  for (float& v : router_) v = 0.5f + float(rng_() % 1000) / 1000.f;

  a_ = Buffer(spec.dtype, {a_rows, spec.K});
  fill_normal(a_, rng_);
  a_dev_ = DeviceBuffer(size_t(a_.nbytes()));
  a_dev_.upload(a_.data(), a_dev_.bytes());
  pairs_dev_ = to_device(sorted_pairs_);
  tiles_dev_ = to_device(tile_experts_);
  total_dev_ = to_device(padded_total);
  router_dev_ = to_device(router_);

  problem.w = view;
  problem.a = a_dev_.data();
  problem.a_stride = spec.K;
  problem.a_rows_are_tokens = spec.fused;
  problem.top_k = kTopK;
  problem.sorted_pair_ids = pairs_dev_.as<int32_t>();
  problem.tile_experts = tiles_dev_.as<int32_t>();
  problem.padded_total = total_dev_.as<int32_t>();
  problem.num_pairs = pairs_;
  problem.max_tiles = tiles();
  problem.out_stride = out_cols();
  if (spec.fused) {
    problem.topk_weights = router_dev_.as<float>();
    problem.fuse_activation = true;
    problem.activation = Activation::silu;
    problem.act_cols = spec.N / 2;
  }
}

Buffer DirectGemm::run(const GemmPlan& plan) {
  const int64_t padded = int64_t(sorted_pairs_.size());
  EXPECT_GT(resident_ctas({problem.w.element, spec_.dtype}, plan.tile_rows, plan.share_activations,
                          plan.strip_run),
            0);
  Buffer out(spec_.dtype, {padded, out_cols()});
  DeviceBuffer out_dev = poisoned(size_t(out.nbytes()));  // unwritten elements: NaN
  problem.out = out_dev.data();
  EXPECT_EQ(launch_expert_gemm(problem, plan, spec_.dtype, nullptr), cudaSuccess);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  out_dev.download(out.data(), size_t(out.nbytes()));
  return out;
}

double DirectGemm::error_against_float64(const Buffer& out) const {
  // The real rows: router weight x sum_k w * a + bias per row (then silu(gate) x up when fused).
  const int64_t cols = out_cols(), I = spec_.N / 2, padded = int64_t(sorted_pairs_.size());
  Buffer got(DType::f64, {pairs_, cols}), want(DType::f64, {pairs_, cols});
  const float* bias_host = weight_.bias.data_as<float>();
  int64_t row = 0;
  for (int64_t r = 0; r < padded; ++r) {
    const int64_t e = row_expert_[size_t(r)];
    if (e < 0) continue;
    const int64_t a_row = spec_.fused ? sorted_pairs_[size_t(r)] / kTopK : r;
    const double scale = spec_.fused ? double(router_[size_t(sorted_pairs_[size_t(r)])]) : 1.0;
    auto value = [&](int64_t n) {
      double sum = 0.0;
      for (int64_t k = 0; k < spec_.K; ++k)
        sum += double(weight_.dequant(e, n, k)) *
               load_as_double(a_.data(), spec_.dtype, a_row * spec_.K + k);
      return scale * sum + bias_host[e * spec_.N + n];
    };
    for (int64_t o = 0; o < cols; ++o) {
      double v = value(o);
      if (spec_.fused) v = v / (1.0 + std::exp(-v)) * value(I + o);
      want.data_as<double>()[row * cols + o] = v;
      got.data_as<double>()[row * cols + o] = load_as_double(out.data(), spec_.dtype, r * cols + o);
    }
    ++row;
  }
  EXPECT_GT(pairs_, 0);
  return relative_error(got, want);
}

}  // namespace qmoe::test
