// cuda-wgmma's gather (routing_glue.hpp) against rows assembled on the host from its definition:
// sorted row r holds the token of pair sorted_pair_ids[r], its channels in the order of the
// row's expert (act-order), in the shared int4 order of each 32-channel span, or as they are,
// times the pair's weight when there are weights. bf16 and f16, experts without rows, H not a
// multiple of the 256-thread block's 2048 elements.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "backend/cuda_wgmma/routing_glue.hpp"
#include "cuda_wgmma/sm90.hpp"

namespace qmoe {
namespace {

struct GatherCase {
  DType dtype;
  bool channels, weights, span_order = false;
};

// The shared int4 order inside a 32-channel span, from its definition (cuda/int4_code_order.hpp):
// column 16 jj + 8 h + 2 t + p holds channel 8 t + 4 jj + 2 h + p.
int64_t span_channel(int64_t c) {
  const int64_t base = c / 32 * 32, q = c % 32;
  const int64_t jj = q / 16, h = (q % 16) / 8, t = (q % 8) / 2, p = q % 2;
  return base + 8 * t + 4 * jj + 2 * h + p;
}

class CudaWgmmaGather : public testing::TestWithParam<GatherCase> {
 protected:
  void SetUp() override { QMOE_REQUIRE_SM90(); }
};

uint16_t bits_of(float v, DType dtype) {
  return dtype == DType::bf16 ? to_bf16(v).bits : to_half(v).bits;
}
float value_of(uint16_t bits, DType dtype) {
  return dtype == DType::bf16 ? to_float(bf16_t{bits}) : to_float(half_t{bits});
}

TEST_P(CudaWgmmaGather, RowsFollowTheirExpertsChannelOrder) {
  const GatherCase& p = GetParam();
  const int64_t E = 6, H = p.span_order ? 2080 : 2056, M = 37;
  const int top_k = 2;
  std::mt19937_64 rng(21);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<uint16_t> hidden(size_t(M * H));
  for (uint16_t& h : hidden) h = bits_of(normal(rng), p.dtype);

  // Each token picks top_k distinct experts among 1..E-2: experts 0 and E-1 get no rows.
  std::vector<int32_t> pair_expert(size_t(M * top_k));
  for (int64_t m = 0; m < M; ++m) {
    std::vector<int32_t> experts(size_t(E - 2));
    std::iota(experts.begin(), experts.end(), 1);
    std::shuffle(experts.begin(), experts.end(), rng);
    for (int j = 0; j < top_k; ++j) pair_expert[size_t(m * top_k + j)] = experts[size_t(j)];
  }
  std::vector<int32_t> sorted(pair_expert.size()), offsets(size_t(E + 1), 0);
  std::iota(sorted.begin(), sorted.end(), 0);
  std::stable_sort(sorted.begin(), sorted.end(),
                   [&](int32_t a, int32_t b) { return pair_expert[a] < pair_expert[b]; });
  for (int32_t e : pair_expert) ++offsets[size_t(e + 1)];
  std::partial_sum(offsets.begin(), offsets.end(), offsets.begin());

  std::vector<int32_t> channels(size_t(E * H));
  for (int64_t e = 0; e < E; ++e) {
    std::iota(channels.begin() + e * H, channels.begin() + (e + 1) * H, 0);
    std::shuffle(channels.begin() + e * H, channels.begin() + (e + 1) * H, rng);
  }
  std::vector<float> weights(pair_expert.size());
  std::uniform_real_distribution<float> spread(0.5f, 1.5f);
  for (float& w : weights) w = spread(rng);

  const DeviceBuffer d_hidden = test::to_device(hidden), d_sorted = test::to_device(sorted),
                     d_offsets = test::to_device(offsets), d_channels = test::to_device(channels),
                     d_weights = test::to_device(weights);
  const int64_t rows = int64_t(sorted.size());
  DeviceBuffer d_rows = test::poisoned(size_t(rows * H) * 2);
  ASSERT_EQ(
      cuda_wgmma::gather_rows_cuda(p.dtype, d_hidden.data(), H, d_sorted.as<int32_t>(), top_k,
                                   p.weights ? d_weights.as<float>() : nullptr,
                                   p.channels ? d_channels.as<int32_t>() : nullptr, p.span_order,
                                   d_offsets.as<int32_t>(), E, rows, d_rows.data(), nullptr),
      cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const std::vector<uint16_t> got = test::to_host<uint16_t>(d_rows, size_t(rows * H));

  // Unweighted rows are copies, bit for bit; weighted ones one rounding of x * w (half an ulp,
  // bounded here by one: 2^-7 relative in bf16, 2^-10 in f16, plus f16's subnormal step). A wrong
  // channel, token or expert is an unrelated N(0, 1) value.
  const double tol = p.dtype == DType::bf16 ? 1.0 / 128 : 1.0 / 1024;
  for (int64_t r = 0; r < rows; ++r) {
    const int32_t pair = sorted[size_t(r)], e = pair_expert[size_t(pair)];
    for (int64_t c = 0; c < H; ++c) {
      const int64_t channel = p.channels     ? channels[size_t(e * H + c)]
                              : p.span_order ? span_channel(c)
                                             : c;
      const uint16_t x = hidden[size_t((pair / top_k) * H + channel)];
      const uint16_t y = got[size_t(r * H + c)];
      if (!p.weights) {
        ASSERT_EQ(y, x) << "row " << r << " column " << c << " expert " << e;
        continue;
      }
      const double want = double(value_of(x, p.dtype)) * weights[size_t(pair)];
      ASSERT_LE(std::fabs(value_of(y, p.dtype) - want), tol * std::fabs(want) + 1e-7)
          << "row " << r << " column " << c << " expert " << e;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Paths, CudaWgmmaGather,
                         testing::Values(GatherCase{DType::bf16, true, false},
                                         GatherCase{DType::bf16, true, true},
                                         GatherCase{DType::f16, true, true},
                                         GatherCase{DType::f16, false, true},
                                         GatherCase{DType::bf16, false, false},
                                         GatherCase{DType::bf16, false, false, true},
                                         GatherCase{DType::f16, false, true, true}),
                         [](const testing::TestParamInfo<GatherCase>& i) {
                           return std::string(i.param.dtype == DType::bf16 ? "bf16" : "f16") +
                                  (i.param.channels     ? "_channel_order"
                                   : i.param.span_order ? "_span_order"
                                                        : "_identity") +
                                  (i.param.weights ? "_weighted" : "");
                         });

}  // namespace
}  // namespace qmoe
