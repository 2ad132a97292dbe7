#include "reference_check.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include "cuda/cuda_check.hpp"
#include "measure/gpu/bench_kernels.hpp"
#include "qmoe/dtype.hpp"

namespace qmoe::bench {

Numerics check_against_reference(const Shape& s, const Experts& experts, const RoutingSet& set,
                                 const DeviceBuffer& out, int64_t tokens, cudaStream_t stream) {
  const int64_t T = std::min(set.M, tokens), P = T * s.k, H = s.H, I = s.I;
  std::vector<uint16_t> x_bits(T * H);
  set.x.download(x_bits.data(), x_bits.size() * 2);
  std::vector<float> x_pairs(P * H);  // each pair's copy of its token's hidden state
  for (int64_t p = 0; p < P; ++p)
    for (int64_t c = 0; c < H; ++c)
      x_pairs[p * H + c] = to_float(bf16_t{x_bits[(p / s.k) * H + c]});
  DeviceBuffer x_d(x_pairs.size() * 4), experts_d(P * 4), h_d(P * 2 * I * 4), a_d(P * I * 4),
      y_d(P * H * 4);
  x_d.upload(x_pairs.data(), x_pairs.size() * 4);
  experts_d.upload(set.ids_host.data(), P * 4);
  QMOE_CUDA_CHECK(reference_expert_matvec(experts.w13.view(), experts_d.as<int32_t>(),
                                          x_d.as<float>(), P, h_d.as<float>(), stream));
  QMOE_CUDA_CHECK(reference_silu_mul(h_d.as<float>(), P, I, a_d.as<float>(), stream));
  QMOE_CUDA_CHECK(reference_expert_matvec(experts.w2.view(), experts_d.as<int32_t>(),
                                          a_d.as<float>(), P, y_d.as<float>(), stream));
  QMOE_CUDA_CHECK(cudaStreamSynchronize(stream));
  std::vector<float> y(P * H), w(P);
  y_d.download(y.data(), y.size() * 4);
  set.topk_weights.download(w.data(), P * 4);
  std::vector<uint16_t> out_bits(set.M * H);
  out.download(out_bits.data(), out_bits.size() * 2);

  Numerics n;
  n.all_finite = std::all_of(out_bits.begin(), out_bits.end(),
                             [](uint16_t b) { return std::isfinite(to_float(bf16_t{b})); });
  double err2 = 0, ref2 = 0;
  for (int64_t t = 0; t < T; ++t)
    for (int64_t c = 0; c < H; ++c) {
      double ref = 0;
      for (int64_t j = 0; j < s.k; ++j) ref += double(w[t * s.k + j]) * y[(t * s.k + j) * H + c];
      const double d = to_float(bf16_t{out_bits[t * H + c]}) - ref;
      err2 += d * d;
      ref2 += ref * ref;
    }
  n.rel_err = std::sqrt(err2 / ref2);
  return n;
}

}  // namespace qmoe::bench
