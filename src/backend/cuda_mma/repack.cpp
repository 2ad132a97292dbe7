#include "backend/cuda_mma/repack.hpp"

#include <algorithm>
#include <cmath>
#include <thread>

#include "core/check.hpp"
#include "core/round_up.hpp"
#include "qmoe/threads.hpp"

namespace qmoe::cuda_mma {

namespace {

// Logical k order of one expert: the input channel behind each logical k (-1 = padding).
// Act-order sorts channels by group and pads every group to whole spans, so that a span never
// straddles two groups; span_group records each span's group.
std::vector<int32_t> act_order_channels(const QuantizedWeight& w, int64_t e,
                                        std::vector<int32_t>& span_group) {
  const int32_t* g_idx = w.g_idx.data_as<int32_t>() + e * w.K;
  std::vector<std::vector<int32_t>> members(static_cast<size_t>(w.groups()));
  for (int64_t k = 0; k < w.K; ++k) members[static_cast<size_t>(g_idx[k])].push_back(int32_t(k));
  std::vector<int32_t> order;
  span_group.clear();
  for (size_t g = 0; g < members.size(); ++g) {
    if (members[g].empty()) continue;
    order.insert(order.end(), members[g].begin(), members[g].end());
    order.resize(static_cast<size_t>(round_up(int64_t(order.size()), kSpanK)), -1);
    span_group.resize(order.size() / kSpanK, int32_t(g));
  }
  return order;
}

// Scales travel as 16-bit values (half the bytes of f32, read once per group). The canonical
// contract says they came from f16 or bf16, so one of the two is normally exact; take the one
// that is. Scales that are exact in neither (e.g. computed in f32) are rounded: to f16 (relative
// error <= 2^-11) when all are normal f16 numbers, else to bf16 (<= 2^-9). Both are below the
// rounding of the 16-bit activations the GEMM multiplies them with.
bool choose_bf16_scales(const QuantizedWeight& w) {
  const float* s = w.scales.data_as<float>();
  const int64_t n = w.scales.numel();
  auto exact_in = [&](bool bf16) {
    for (int64_t i = 0; i < n; ++i) {
      const float back = bf16 ? to_float(to_bf16(s[i])) : to_float(to_half(s[i]));
      if (back != s[i]) return false;
    }
    return true;
  };
  const bool prefer_bf16 = w.scheme.source_scale_dtype == DType::bf16;
  if (exact_in(prefer_bf16)) return prefer_bf16;
  if (exact_in(!prefer_bf16)) return !prefer_bf16;
  for (int64_t i = 0; i < n; ++i) {
    const float a = std::fabs(s[i]);
    if (a != 0.0f && (a < 6.103515625e-5f || a > 65504.0f)) return true;
  }
  return false;
}

uint16_t scale_bits(float s, bool bf16) { return bf16 ? to_bf16(s).bits : to_half(s).bits; }

// The element of the canonical scheme's codes; throws for schemes the layout cannot hold.
WeightElement element_of(const QuantScheme& scheme, const std::string& what) {
  if (scheme.kind == WeightKind::mxfp4) return WeightElement::e2m1;
  check(scheme.bits == 4 || scheme.bits == 8, "{}: cuda-mma needs 4 or 8-bit codes, got {}", what,
        scheme.bits);
  return scheme.bits == 4 ? WeightElement::int4 : WeightElement::int8;
}

// bf16 bits of the e8m0 scale 2^(e - 127): bf16 has f32's exponent field, so e itself for
// e >= 1; 2^-127 (e = 0) is the subnormal 0x0040. (validate() refused the NaN byte 0xff.)
uint16_t e8m0_as_bf16(uint8_t e) { return e == 0 ? uint16_t{0x0040} : uint16_t(e << 7); }

}  // namespace

std::vector<int64_t> gated_row_order(int64_t I, bool interleaved) {
  const int64_t strips = (I + 7) / 8;
  std::vector<int64_t> order(size_t(strips * kStripRows), -1);
  for (int64_t s = 0; s < strips; ++s)
    for (int r = 0; r < 8; ++r) {
      const int64_t j = s * 8 + r;
      if (j >= I) continue;
      order[size_t(s * kStripRows + r)] = interleaved ? 2 * j : j;
      order[size_t(s * kStripRows + 8 + r)] = interleaved ? 2 * j + 1 : I + j;
    }
  return order;
}

PackedWeight pack_weight(const QuantizedWeight& w, const std::string& what,
                         std::span<const int64_t> row_source) {
  const QuantScheme& scheme = w.scheme;
  const WeightElement element = element_of(scheme, what);
  check(scheme.group_size == kChannelwise || scheme.group_size % kSpanK == 0,
        "{}: cuda-mma needs channelwise scales or a group size that is a multiple of {}, got {}",
        what, kSpanK, scheme.group_size);
  check(w.K_full == 0 || scheme.act_order,
        "{}: a K-split shard (K_full {}) without act-order is not a cuda-mma layout", what,
        w.K_full);

  for (const int64_t n : row_source)
    check(n >= -1 && n < w.N, "{}: row order names row {} of {}", what, n, w.N);
  const int64_t packed_rows = row_source.empty() ? w.N : int64_t(row_source.size());
  // The weight row behind packed row n, or -1.
  auto source = [&](int64_t n) -> int64_t {
    if (n >= packed_rows) return -1;
    return row_source.empty() ? n : row_source[size_t(n)];
  };

  PackedWeight p;
  PackedWeightView& v = p.shape;
  v.element = element;
  v.N = packed_rows;
  v.K = w.K;
  v.groups = w.groups();
  v.scales_bf16 = element == WeightElement::e2m1 || choose_bf16_scales(w);
  const int ck = chunk_k(element);

  // Logical k order per expert.
  std::vector<std::vector<int32_t>> channels(static_cast<size_t>(w.E));
  std::vector<std::vector<int32_t>> span_groups(static_cast<size_t>(w.E));
  int64_t k_logical = w.K;
  if (scheme.act_order) {
    k_logical = 0;
    for (int64_t e = 0; e < w.E; ++e) {
      channels[size_t(e)] = act_order_channels(w, e, span_groups[size_t(e)]);
      k_logical = std::max<int64_t>(k_logical, int64_t(channels[size_t(e)].size()));
    }
  }
  v.K_pad = round_up(k_logical, ck);
  v.chunks = v.K_pad / ck;
  v.strips = (packed_rows + kStripRows - 1) / kStripRows;
  v.spans_per_group =
      scheme.group_size == kChannelwise ? v.K_pad / kSpanK : scheme.group_size / kSpanK;
  if (scheme.act_order) {
    p.k_source.assign(size_t(w.E * v.K_pad), -1);
    p.span_group.assign(size_t(w.E * v.K_pad / kSpanK), 0);
    for (int64_t e = 0; e < w.E; ++e) {
      std::copy(channels[size_t(e)].begin(), channels[size_t(e)].end(),
                p.k_source.begin() + e * v.K_pad);
      std::copy(span_groups[size_t(e)].begin(), span_groups[size_t(e)].end(),
                p.span_group.begin() + e * v.K_pad / kSpanK);
    }
  }

  const uint8_t* codes = w.codes.data_as<uint8_t>();
  const int64_t row_bytes = w.code_bytes_per_row();
  // Code of (e, row, logical k); padding rows and channels read 0 (their activations are 0).
  auto code_at = [&](int64_t e, int64_t packed_n, int64_t k) -> uint32_t {
    const int64_t n = source(packed_n);
    if (n < 0) return 0;
    const int64_t c = scheme.act_order ? p.k_source[size_t(e * v.K_pad + k)] : (k < w.K ? k : -1);
    if (c < 0) return 0;
    const uint8_t* row = codes + (e * w.N + n) * row_bytes;
    if (scheme.bits == 8) return row[c];
    return (c & 1) ? row[c / 2] >> 4 : row[c / 2] & 0x0f;
  };

  const int64_t chunk_bytes = int64_t(kLanes) * kChunkBytesPerLane;
  p.codes.assign(size_t(w.E * v.strips * v.chunks * chunk_bytes), 0);
  auto pack_expert = [&](int64_t e) {
    for (int64_t s = 0; s < v.strips; ++s) {
      for (int64_t c = 0; c < v.chunks; ++c) {
        uint32_t* out = reinterpret_cast<uint32_t*>(
            p.codes.data() + ((e * v.strips + s) * v.chunks + c) * chunk_bytes);
        for (int lane = 0; lane < kLanes; ++lane) {
          const int g = lane / 4, t = lane % 4;
          const int64_t n_lo = s * kStripRows + g, n_hi = n_lo + 8;
          // R0..R3 codes of step (span, jj): {row, k offset} pairs, see layout.hpp.
          auto step_codes = [&](int span, int jj, uint32_t r[4][2]) {
            const int64_t ka = c * ck + span * kSpanK + 8 * t + 4 * jj;
            const int64_t rows[4] = {n_lo, n_hi, n_lo, n_hi};
            for (int i = 0; i < 4; ++i) {
              const int64_t k0 = ka + (i >= 2 ? 2 : 0);
              r[i][0] = code_at(e, rows[i], k0);
              r[i][1] = code_at(e, rows[i], k0 + 1);
            }
          };
          uint32_t* words = out + lane * 4;
          uint32_t r[4][2];
          if (code_bits(element) == 4) {
            for (int step = 0; step < 4; ++step) {
              step_codes(step / 2, step % 2, r);
              uint32_t word = 0;
              for (int i = 0; i < 4; ++i) word |= r[i][0] << (4 * i) | r[i][1] << (16 + 4 * i);
              words[step] = element == WeightElement::int4 ? word ^ int4_order::kCodeFlip : word;
            }
          } else {
            for (int jj = 0; jj < 2; ++jj) {
              step_codes(0, jj, r);
              words[2 * jj] = r[0][0] | r[0][1] << 8 | r[1][0] << 16 | r[1][1] << 24;
              words[2 * jj + 1] = r[2][0] | r[2][1] << 8 | r[3][0] << 16 | r[3][1] << 24;
            }
          }
        }
      }
    }
  };
  const int64_t threads = std::clamp<int64_t>(usable_cpus(), 1, std::clamp<int64_t>(w.E, 1, 16));
  std::vector<std::thread> pool;
  for (int64_t i = 0; i < threads; ++i)
    pool.emplace_back([&, i] {
      for (int64_t e = i; e < w.E; e += threads) pack_expert(e);
    });
  for (std::thread& th : pool) th.join();

  // Scales and zeros, one pair of rows (g, g + 8) per 32-bit / 16-bit word.
  auto scale_of = [&](int64_t at) -> uint32_t {
    if (element == WeightElement::e2m1) return e8m0_as_bf16(w.scales.data_as<uint8_t>()[at]);
    return scale_bits(w.scales.data_as<float>()[at], v.scales_bf16);
  };
  const uint8_t* zeros = scheme.has_zero_points() ? w.zeros.data_as<uint8_t>() : nullptr;
  const int64_t G = v.groups;
  // Two groups of padding after the last: the staged K loop loads scales a group ahead without
  // checking for the end, and at a range's last flush that reaches two groups past it.
  p.scale_pairs.assign(size_t((w.E * v.strips * G + 2) * kGroupPairStride), 0);
  if (zeros) p.zero_pairs.assign(p.scale_pairs.size(), 0);
  for (int64_t e = 0; e < w.E; ++e)
    for (int64_t grp = 0; grp < G; ++grp)
      for (int64_t s = 0; s < v.strips; ++s)
        for (int g = 0; g < 8; ++g) {
          const int64_t n_lo = source(s * kStripRows + g), n_hi = source(s * kStripRows + g + 8);
          const size_t at = size_t(group_pair_index(e, s, grp, g, v.strips, G));
          uint32_t pair = 0;
          uint16_t zpair = 0;
          if (n_lo >= 0) {
            pair |= scale_of((e * w.N + n_lo) * G + grp);
            if (zeros) zpair |= zeros[(e * w.N + n_lo) * G + grp];
          }
          if (n_hi >= 0) {
            pair |= scale_of((e * w.N + n_hi) * G + grp) << 16;
            if (zeros) zpair |= uint16_t(zeros[(e * w.N + n_hi) * G + grp] << 8);
          }
          p.scale_pairs[at] = pair;
          if (zeros) p.zero_pairs[at] = zpair;
        }
  if (w.has_bias()) {
    const float* b = w.bias.data_as<float>();
    p.bias.assign(size_t(w.E * packed_rows), 0.0f);
    for (int64_t e = 0; e < w.E; ++e)
      for (int64_t n = 0; n < packed_rows; ++n)
        if (const int64_t src = source(n); src >= 0)
          p.bias[size_t(e * packed_rows + n)] = b[e * w.N + src];
  }
  return p;
}

}  // namespace qmoe::cuda_mma
