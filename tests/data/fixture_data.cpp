#include <numeric>

#include "data/fixture_spec.hpp"

namespace qmoe::fixtures {

namespace {

// splitmix64: a fixed, well-mixed hash so fixtures never depend on a library's RNG.
uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

struct Stream {
  uint64_t state;
  uint64_t next() { return state = mix(state); }
};

// Scales (k / 1024 for k in 1..256) and biases ((k - 128) / 64) are exact in f16 and bf16.
QuantizedWeight weight(const FixtureSpec& spec, int64_t N, int64_t K, Stream& s) {
  const QuantScheme& q = spec.scheme;
  QuantizedWeight w;
  w.scheme = q;
  w.E = spec.E;
  w.N = N;
  w.K = K;
  const int64_t groups = q.groups_for(K);
  w.codes = Buffer(DType::u8, {w.E, N, w.code_bytes_per_row()});
  for (uint8_t& c : w.codes.span<uint8_t>()) c = static_cast<uint8_t>(s.next());
  if (q.kind == WeightKind::mxfp4) {
    // e8m0 exponents 2^-8 .. 2^1 around the unit scale.
    w.scales = Buffer(DType::u8, {w.E, N, groups});
    for (uint8_t& v : w.scales.span<uint8_t>()) v = static_cast<uint8_t>(119 + s.next() % 10);
  } else {
    w.scales = Buffer(DType::f32, {w.E, N, groups});
    for (float& v : w.scales.span<float>()) v = static_cast<float>(1 + s.next() % 256) / 1024.0f;
  }
  if (q.has_zero_points()) {
    w.zeros = Buffer(DType::u8, {w.E, N, groups});
    for (uint8_t& z : w.zeros.span<uint8_t>())
      z = static_cast<uint8_t>(s.next() % (q.max_code() + 1));
  }
  if (q.act_order) {
    // Groups stay contiguous in a random order of the input channels (GPTQ desc_act).
    w.g_idx = Buffer(DType::i32, {w.E, K});
    for (int64_t e = 0; e < w.E; ++e) {
      std::vector<int32_t> perm(static_cast<size_t>(K));
      std::iota(perm.begin(), perm.end(), 0);
      for (size_t i = perm.size() - 1; i > 0; --i) std::swap(perm[i], perm[s.next() % (i + 1)]);
      for (int64_t j = 0; j < K; ++j) {
        w.g_idx.data_as<int32_t>()[e * K + perm[static_cast<size_t>(j)]] =
            static_cast<int32_t>(j / q.group_size_for(K));
      }
    }
  }
  if (spec.bias) {
    w.bias = Buffer(DType::f32, {w.E, N});
    for (float& v : w.bias.span<float>())
      v = static_cast<float>(static_cast<int>(s.next() % 256) - 128) / 64.0f;
  }
  return w;
}

}  // namespace

MoEConfig fixture_config(const FixtureSpec& spec) {
  MoEConfig c;
  c.num_experts = spec.E;
  c.hidden = spec.H;
  c.intermediate = spec.I;
  c.routing.top_k = 2;
  c.routing.renormalize = true;
  c.w13_bias = c.w2_bias = spec.bias;
  return c;
}

QuantizedExperts fixture_experts(const FixtureSpec& spec, int layer) {
  uint64_t seed = 0xcbf29ce484222325ull;  // FNV-1a of the name: the same on every platform
  for (char ch : spec.dir) seed = (seed ^ static_cast<unsigned char>(ch)) * 0x100000001b3ull;
  Stream s{seed + static_cast<uint64_t>(layer)};
  QuantizedWeight w13 = weight(spec, 2 * spec.I, spec.H, s);
  QuantizedWeight w2 = weight(spec, spec.H, spec.I, s);
  return QuantizedExperts(std::move(w13), std::move(w2));
}

}  // namespace qmoe::fixtures
