#include "format/projection.hpp"
#include <cstring>
#include <vector>

#include <algorithm>

#include "core/check.hpp"

namespace qmoe::format {

QuantizedWeight allocate_stacked(int64_t E, int64_t N, int64_t K, const QuantScheme& scheme,
                                 bool bias, int64_t K_full) {
  QuantizedWeight w;
  w.scheme = scheme;
  w.E = E;
  w.N = N;
  w.K = K;
  w.K_full = K_full;
  const int64_t groups = w.groups();
  w.codes = Buffer(DType::u8, {E, N, w.code_bytes_per_row()});
  w.scales = Buffer(scheme.kind == WeightKind::mxfp4 ? DType::u8 : DType::f32, {E, N, groups});
  if (scheme.has_zero_points()) w.zeros = Buffer(DType::u8, {E, N, groups});
  if (scheme.act_order) w.g_idx = Buffer(DType::i32, {E, K});
  if (bias) w.bias = Buffer(DType::f32, {E, N});
  return w;
}

std::vector<Range> w13_row_ranges(Activation activation, int64_t I, Range channels) {
  if (activation == Activation::swigluoai) return {{2 * channels.first, 2 * channels.count}};
  if (!is_gated(activation)) return {channels};
  return {channels, {I + channels.first, channels.count}};
}

uint8_t* stacked_codes(QuantizedWeight& w, int64_t e, int64_t row0) {
  return w.codes.data_as<uint8_t>() + (e * w.N + row0) * w.code_bytes_per_row();
}

void put_projection(QuantizedWeight& w, int64_t e, int64_t row0, int part, const Projection& p,
                    const std::string& what) {
  const int64_t groups = w.scales.shape()[2];
  const bool mx = w.scheme.kind == WeightKind::mxfp4;
  const int64_t p_groups = mx ? p.e8m0.cols : p.scales.cols;
  check(
      p.K() == w.K && p_groups == groups && p.bias.empty() != w.has_bias() && row0 + p.N() <= w.N,
      "{}: expert {} part {} is [{} x {}] with {} groups{}, expected [rows x {}] with {} groups{}",
      what, e, part, p.N(), p.K(), p_groups, p.bias.empty() ? "" : " and bias", w.K, groups,
      w.has_bias() ? " and bias" : "");
  const int64_t row_bytes = w.code_bytes_per_row();
  uint8_t* codes = stacked_codes(w, e, row0);
  if (!p.codes_in_place) {
    const int bits = w.scheme.bits;
    for (int64_t n = 0; n < p.N(); ++n) {
      uint8_t* dst = codes + n * row_bytes;
      const uint8_t* src = p.codes.values.data() + n * w.K;
      if (bits == 8) {
        std::copy(src, src + w.K, dst);
      } else {
        // Canonical int4: two codes per byte, the even k in the low nibble.
        for (int64_t k = 0; k < w.K; k += 2)
          dst[k / 2] = static_cast<uint8_t>((src[k] & 0x0f) | (src[k + 1] << 4));
      }
    }
  }
  const int64_t at = (e * w.N + row0) * groups;
  if (mx) {
    std::copy(p.e8m0.values.begin(), p.e8m0.values.end(), w.scales.data_as<uint8_t>() + at);
  } else {
    std::copy(p.scales.values.begin(), p.scales.values.end(), w.scales.data_as<float>() + at);
  }
  if (w.scheme.has_zero_points())
    std::copy(p.zeros.values.begin(), p.zeros.values.end(), w.zeros.data_as<uint8_t>() + at);
  if (w.has_bias())
    std::copy(p.bias.begin(), p.bias.end(), w.bias.data_as<float>() + e * w.N + row0);
  if (w.scheme.act_order) {
    check(static_cast<int64_t>(p.g_idx.size()) == w.K, "{}: expert {} part {} has no g_idx", what,
          e, part);
    int32_t* g_idx = w.g_idx.data_as<int32_t>() + e * w.K;
    check(part == 0 || std::equal(p.g_idx.begin(), p.g_idx.end(), g_idx),
          "{}: expert {}: the stacked projections have different g_idx; the canonical form "
          "holds one act-order permutation per expert (gate and up share their input)",
          what, e);
    std::copy(p.g_idx.begin(), p.g_idx.end(), g_idx);
  }
}

Projection slice_projection(const QuantizedWeight& w, int64_t e, int64_t row0, int64_t rows) {
  const int64_t groups = w.scheme.groups_for(w.K);
  const bool mx = w.scheme.kind == WeightKind::mxfp4;
  Projection p;
  p.codes = Matrix<uint8_t>(rows, w.K);
  if (mx) {
    p.e8m0 = Matrix<uint8_t>(rows, groups);
  } else {
    p.scales = Matrix<float>(rows, groups);
  }
  if (w.scheme.has_zero_points()) p.zeros = Matrix<uint8_t>(rows, groups);
  const uint8_t* codes = w.codes.data_as<uint8_t>();
  const uint8_t* zeros = w.scheme.has_zero_points() ? w.zeros.data_as<uint8_t>() : nullptr;
  for (int64_t n = 0; n < rows; ++n) {
    const uint8_t* row = codes + (e * w.N + row0 + n) * w.code_bytes_per_row();
    for (int64_t k = 0; k < w.K; ++k) {
      // Canonical int4: the even k in the low nibble.
      p.codes.at(n, k) =
          w.scheme.bits == 8 ? row[k] : static_cast<uint8_t>((row[k / 2] >> (4 * (k & 1))) & 0xf);
    }
    const int64_t at = (e * w.N + row0 + n) * groups;
    for (int64_t g = 0; g < groups; ++g) {
      if (mx) {
        p.e8m0.at(n, g) = w.scales.data_as<uint8_t>()[at + g];
        continue;
      }
      p.scales.at(n, g) = w.scales.data_as<float>()[at + g];
      if (zeros) p.zeros.at(n, g) = zeros[at + g];
    }
    if (w.has_bias()) p.bias.push_back(w.bias.data_as<float>()[e * w.N + row0 + n]);
  }
  if (w.scheme.act_order) {
    const int32_t* g = w.g_idx.data_as<int32_t>() + e * w.K;
    p.g_idx.assign(g, g + w.K);
  }
  return p;
}

}  // namespace qmoe::format
