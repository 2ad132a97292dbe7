#include "format/projection.hpp"

#include <algorithm>

#include "core/check.hpp"

namespace qmoe::format {

QuantizedWeight stack_projections(const std::vector<std::vector<Projection>>& experts,
                                  const QuantScheme& scheme, const std::string& what) {
  check(!experts.empty() && !experts[0].empty(), "{}: no experts", what);
  QuantizedWeight w;
  w.scheme = scheme;
  w.E = static_cast<int64_t>(experts.size());
  w.K = experts[0][0].K();
  for (const Projection& p : experts[0]) w.N += p.N();
  const int64_t groups = experts[0][0].scales.cols;
  const bool has_bias = !experts[0][0].bias.empty();
  w.codes = Buffer(DType::u8, {w.E, w.N, w.code_bytes_per_row()});
  w.scales = Buffer(DType::f32, {w.E, w.N, groups});
  if (scheme.has_zero_points()) w.zeros = Buffer(DType::u8, {w.E, w.N, groups});
  if (scheme.act_order) w.g_idx = Buffer(DType::i32, {w.E, w.K});
  if (has_bias) w.bias = Buffer(DType::f32, {w.E, w.N});

  uint8_t* codes = w.codes.data_as<uint8_t>();
  float* scales = w.scales.data_as<float>();
  uint8_t* zeros = scheme.has_zero_points() ? w.zeros.data_as<uint8_t>() : nullptr;
  float* bias = has_bias ? w.bias.data_as<float>() : nullptr;
  for (int64_t e = 0; e < w.E; ++e) {
    int64_t row = 0;
    for (size_t part = 0; part < experts[e].size(); ++part) {
      const Projection& p = experts[e][part];
      check(p.K() == w.K && p.scales.cols == groups && p.bias.empty() != has_bias,
            "{}: expert {} part {} is [{} x {}] with {} groups{}, unlike expert 0 ([N x {}], {} "
            "groups{})",
            what, e, part, p.N(), p.K(), p.scales.cols, p.bias.empty() ? "" : " and bias", w.K,
            groups, has_bias ? " and bias" : "");
      for (int64_t n = 0; n < p.N(); ++n, ++row) {
        uint8_t* dst = codes + (e * w.N + row) * w.code_bytes_per_row();
        for (int64_t k = 0; k < w.K; ++k) {
          const uint8_t q = p.codes.at(n, k);
          if (scheme.bits == 8) {
            dst[k] = q;
          } else {
            // Canonical int4: two codes per byte, the even k in the low nibble.
            dst[k / 2] = static_cast<uint8_t>((k & 1) ? (dst[k / 2] | (q << 4)) : (q & 0x0f));
          }
        }
        for (int64_t g = 0; g < groups; ++g) {
          scales[(e * w.N + row) * groups + g] = p.scales.at(n, g);
          if (zeros) zeros[(e * w.N + row) * groups + g] = p.zeros.at(n, g);
        }
        if (bias) bias[e * w.N + row] = p.bias[static_cast<size_t>(n)];
      }
      if (scheme.act_order) {
        check(static_cast<int64_t>(p.g_idx.size()) == w.K, "{}: expert {} part {} has no g_idx",
              what, e, part);
        check(part == 0 || p.g_idx == experts[e][0].g_idx,
              "{}: expert {}: the stacked projections have different g_idx; the canonical form "
              "holds one act-order permutation per expert (gate and up share their input)",
              what, e);
        std::copy(p.g_idx.begin(), p.g_idx.end(), w.g_idx.data_as<int32_t>() + e * w.K);
      }
    }
    check(row == w.N, "{}: expert {} has {} rows, expert 0 has {}", what, e, row, w.N);
  }
  return w;
}

Projection slice_projection(const QuantizedWeight& w, int64_t e, int64_t row0, int64_t rows) {
  const int64_t groups = w.scheme.groups_for(w.K);
  Projection p;
  p.codes = Matrix<uint8_t>(rows, w.K);
  p.scales = Matrix<float>(rows, groups);
  if (w.scheme.has_zero_points()) p.zeros = Matrix<uint8_t>(rows, groups);
  const uint8_t* codes = w.codes.data_as<uint8_t>();
  const float* scales = w.scales.data_as<float>();
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
      p.scales.at(n, g) = scales[at + g];
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
