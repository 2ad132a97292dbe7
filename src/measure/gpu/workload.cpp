#include "measure/gpu/workload.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "cuda/align.hpp"
#include "cuda/cuda_check.hpp"
#include "cuda/routing.hpp"
#include "measure/gpu/bench_kernels.hpp"
#include "qmoe/error.hpp"

namespace qmoe::bench {

MoEConfig moe_config(const Shape& s) {
  MoEConfig c;
  c.num_experts = s.E;
  c.hidden = s.H;
  c.intermediate = s.I;
  c.routing.top_k = s.k;
  c.activation = Activation::silu;
  return c;
}

const std::vector<Shape>& benchmark_shapes() {
  static const std::vector<Shape> shapes{
      {"mixtral-8x7b", 4096, 14336, 8, 2},       {"qwen3-30b-a3b", 2048, 768, 128, 8},
      {"deepseek-v3", 7168, 2048, 256, 8},       {"gpt-oss-120b", 2880, 2880, 128, 4, false},
      {"gpt-oss-20b", 2880, 2880, 32, 4, false},
  };
  return shapes;
}

const std::vector<Scheme>& benchmark_schemes() {
  static const std::vector<Scheme> schemes{
      {"int4-g128", 4, 128, false}, {"int4-g128-asym", 4, 128, true}, {"int8-g128", 8, 128, false},
      {"int4-g32", 4, 32, false},   {"mxfp4", 4, 32, false, true},
  };
  return schemes;
}

std::string scheme_names() {
  std::string names;
  for (const Scheme& s : benchmark_schemes()) names += (names.empty() ? "" : ", ") + s.name;
  return names;
}

const Scheme& find_scheme(const std::string& name) {
  for (const Scheme& s : benchmark_schemes())
    if (s.name == name) return s;
  throw Error(fmt::format("unknown scheme '{}': known are {}", name, scheme_names()));
}

WeightView Weight::view() const {
  return {codes.as<uint8_t>(),
          scales.as<float>(),
          zeros.empty() ? nullptr : zeros.as<uint8_t>(),
          N,
          K,
          scheme.bits,
          scheme.group,
          scheme.mxfp4};
}

namespace {

Weight make_weight(int64_t E, int64_t N, int64_t K, const Scheme& scheme, uint64_t seed,
                   cudaStream_t stream) {
  const int64_t groups = E * N * (K / scheme.group);
  Weight w{E,
           N,
           K,
           scheme,
           DeviceBuffer(E * N * K * scheme.bits / 8),
           DeviceBuffer(groups * sizeof(float)),
           scheme.zero_points ? DeviceBuffer(groups) : DeviceBuffer()};
  QMOE_CUDA_CHECK(fill_weight(w.codes.as<uint8_t>(), w.scales.as<float>(),
                              w.zeros.empty() ? nullptr : w.zeros.as<uint8_t>(), E, N, K,
                              scheme.bits, scheme.group, scheme.mxfp4, seed, stream));
  return w;
}

DeviceBuffer dequantized(const Weight& w, cudaStream_t stream) {
  DeviceBuffer out(w.E * w.N * w.K * 2);
  QMOE_CUDA_CHECK(dequantize_bf16(w.view(), w.E, out.as<uint16_t>(), stream));
  return out;
}

QuantizedWeight canonical(const Weight& w) {
  QuantizedWeight q;
  q.scheme = QuantScheme{};
  q.scheme.bits = w.scheme.bits;
  q.scheme.group_size = w.scheme.group;
  q.scheme.zero_point = w.scheme.zero_points ? ZeroPoint::explicit_ : ZeroPoint::none;
  if (w.scheme.mxfp4) q.scheme = QuantScheme{.kind = WeightKind::mxfp4, .group_size = 32};
  q.E = w.E;
  q.N = w.N;
  q.K = w.K;
  q.codes = Buffer(DType::u8, {w.E, w.N, w.K * w.scheme.bits / 8});
  w.codes.download(q.codes.data(), static_cast<size_t>(q.codes.nbytes()));
  Buffer scales(DType::f32, {w.E, w.N, w.K / w.scheme.group});
  w.scales.download(scales.data(), static_cast<size_t>(scales.nbytes()));
  if (w.scheme.mxfp4) {
    // fill_weight made every MXFP4 scale a power of two: its e8m0 byte is the exponent + 127.
    q.scales = Buffer(DType::u8, scales.shape());
    std::transform(scales.span<float>().begin(), scales.span<float>().end(),
                   q.scales.data_as<uint8_t>(),
                   [](float s) { return static_cast<uint8_t>(std::ilogb(s) + 127); });
  } else {
    q.scales = std::move(scales);
  }
  if (w.scheme.zero_points) {
    q.zeros = Buffer(DType::u8, {w.E, w.N, w.K / w.scheme.group});
    w.zeros.download(q.zeros.data(), static_cast<size_t>(q.zeros.nbytes()));
  }
  return q;
}

}  // namespace

Experts make_experts(const Shape& s, const Scheme& scheme, uint64_t seed, cudaStream_t stream) {
  Experts x;
  x.w13 = make_weight(s.E, 2 * s.I, s.H, scheme, seed, stream);
  x.w2 = make_weight(s.E, s.H, s.I, scheme, seed + 1, stream);
  x.w13_bf16 = dequantized(x.w13, stream);
  x.w2_bf16 = dequantized(x.w2, stream);
  QMOE_CUDA_CHECK(cudaStreamSynchronize(stream));
  return x;
}

QuantizedExperts to_canonical(const Experts& x) {
  return QuantizedExperts(canonical(x.w13), canonical(x.w2));
}

int64_t weight_bytes_per_expert(const Shape& s, const Scheme& scheme) {
  const int64_t weights = 3 * s.H * s.I, groups = weights / scheme.group;
  const int64_t scale_bytes = scheme.mxfp4 ? 1 : 2;
  return weights * scheme.bits / 8 + groups * scale_bytes + (scheme.zero_points ? groups : 0);
}

RoutingSet make_routing_set(const Shape& s, int64_t M, uint64_t seed, cudaStream_t stream) {
  RoutingSet r;
  r.M = M;
  const int64_t pairs = M * s.k;
  r.x = DeviceBuffer(M * s.H * 2);
  r.logits = DeviceBuffer(M * s.E * sizeof(float));
  r.topk_weights = DeviceBuffer(pairs * sizeof(float));
  r.topk_ids = DeviceBuffer(pairs * sizeof(int32_t));
  r.sorted_pair_ids = DeviceBuffer(pairs * sizeof(int32_t));
  r.pair_rows = DeviceBuffer(pairs * sizeof(int32_t));
  QMOE_CUDA_CHECK(fill_normal_bf16(r.x.as<uint16_t>(), M * s.H, seed, 1.0f, stream));
  QMOE_CUDA_CHECK(fill_normal_f32(r.logits.as<float>(), M * s.E, seed ^ 0x5bd1e995, 1.0f, stream));

  RoutingConfig routing;
  routing.top_k = s.k;
  const RoutingParams params = routing_params(routing, nullptr);
  validate_routing(params, s.E);
  QMOE_CUDA_CHECK(route_topk_cuda(params, r.logits.as<float>(), s.E, M, s.E,
                                  r.topk_weights.as<float>(), r.topk_ids.as<int32_t>(), stream));

  const AlignSizes sizes = align_sizes(pairs, s.E, 1);
  DeviceBuffer tiles(sizes.max_tiles * sizeof(int32_t)), offsets((s.E + 1) * sizeof(int32_t)),
      total(sizeof(int32_t)), workspace(sizes.workspace_bytes);
  AlignOutputs out;
  out.sorted_pair_ids = r.sorted_pair_ids.as<int32_t>();
  out.tile_experts = tiles.as<int32_t>();
  out.expert_offsets = offsets.as<int32_t>();
  out.padded_total = total.as<int32_t>();
  out.pair_rows = r.pair_rows.as<int32_t>();
  QMOE_CUDA_CHECK(align_by_expert_cuda(r.topk_ids.as<int32_t>(), pairs, s.E, nullptr, s.E, 1,
                                       workspace.data(), sizes.workspace_bytes, out, stream));
  QMOE_CUDA_CHECK(cudaStreamSynchronize(stream));
  r.ids_host.resize(pairs);
  r.topk_ids.download(r.ids_host.data(), pairs * sizeof(int32_t));
  r.expert_offsets.resize(s.E + 1);
  offsets.download(r.expert_offsets.data(), (s.E + 1) * sizeof(int32_t));
  for (int64_t e = 0; e < s.E; ++e) r.experts_hit += r.expert_offsets[e + 1] > r.expert_offsets[e];
  return r;
}

}  // namespace qmoe::bench
