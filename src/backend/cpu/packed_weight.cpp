#include "backend/cpu/packed_weight.hpp"

#include <algorithm>
#include <cstring>

#include "backend/cpu/thread_pool.hpp"
#include "core/check.hpp"
#include "quant/act_order.hpp"

namespace qmoe::cpu {

namespace {

void check_packable(const QuantizedWeight& w, const std::string& what) {
  const QuantScheme& s = w.scheme;
  check(w.K_full == 0 || w.K_full == w.K,
        "{}: a K-split act-order shard (K = {} of K_full = {}); the cpu backend packs whole-K "
        "weights only (valid: the unsplit weight)",
        what, w.K, w.K_full);
  const int64_t G = s.group_size_for(w.K);
  check(s.bits == 8 || G % 2 == 0,
        "{}: 4-bit group size {} is odd; the cpu backend packs k-pairs inside a group (valid: an "
        "even group size)",
        what, G);
}

}  // namespace

PackedMatrix pack_weight(const QuantizedWeight& w, const std::string& what, int64_t panels,
                         const std::function<int64_t(int64_t)>& row_of_slot) {
  check_packable(w, what);
  PackedMatrix m;
  const QuantScheme& s = w.scheme;
  m.format = PanelFormat{.bits = s.bits,
                         .e2m1 = s.kind == WeightKind::mxfp4,
                         .zero_points = s.has_zero_points(),
                         .groups = s.groups_for(w.K),
                         .group_k = s.group_size_for(w.K)};
  m.E = w.E;
  m.K = w.K;
  m.panels = panels;
  m.bytes = HugePageBytes(static_cast<size_t>(w.E * panels * m.format.panel_bytes()));

  const int64_t slots = panels * kTileRows;
  std::vector<int64_t> rows(static_cast<size_t>(slots));
  for (int64_t slot = 0; slot < slots; ++slot) rows[slot] = row_of_slot(slot);
  if (w.has_bias()) {
    m.bias.assign(static_cast<size_t>(w.E * slots), 0.0f);
    const float* bias = w.bias.data_as<float>();
    for (int64_t e = 0; e < w.E; ++e)
      for (int64_t slot = 0; slot < slots; ++slot)
        if (rows[slot] >= 0) m.bias[e * slots + slot] = bias[e * w.N + rows[slot]];
  }
  if (s.act_order) {
    m.k_order.resize(static_cast<size_t>(w.E * w.K));
    for (int64_t e = 0; e < w.E; ++e) {
      const std::vector<int32_t> order = even_act_order(w, e, "cpu", what);
      std::copy(order.begin(), order.end(), m.k_order.begin() + e * w.K);
    }
  }

  const PanelFormat& f = m.format;
  const int64_t row_bytes = w.code_bytes_per_row(), groups = f.groups, G = f.group_k;
  const uint8_t* codes = w.codes.data_as<uint8_t>();
  const float* scales = f.e2m1 ? nullptr : w.scales.data_as<float>();
  const uint8_t* zeros = f.zero_points ? w.zeros.data_as<uint8_t>() : nullptr;
  uint8_t* out = m.bytes.data();

  ThreadPool::instance().parallel_for(w.E, [&](int64_t e) {
    const int32_t* order = m.k_order_of(e);
    auto code = [&](int64_t row, int64_t j) -> uint32_t {
      const int64_t k = order ? order[j] : j;
      const uint8_t* r = codes + (e * w.N + row) * row_bytes;
      if (f.bits == 8) return r[k];
      return (k & 1) ? r[k / 2] >> 4 : r[k / 2] & 0x0f;
    };
    for (int64_t p = 0; p < panels; ++p) {
      const int64_t* panel_rows = rows.data() + p * kTileRows;
      uint8_t* dst = out + (e * panels + p) * f.panel_bytes();
      for (int64_t g = 0; g < groups; ++g, dst += f.group_bytes()) {
        if (f.e2m1) {  // the e8m0 bytes themselves (validate() refused the NaN byte 0xff)
          const uint8_t* e8m0 = w.scales.data_as<uint8_t>();
          for (int i = 0; i < kTileRows; ++i)
            dst[i] = panel_rows[i] < 0 ? 0 : e8m0[(e * w.N + panel_rows[i]) * groups + g];
        } else {
          float group_scales[kTileRows] = {};
          uint8_t* group_zeros = dst + kTileRows * 4;
          if (zeros) std::memset(group_zeros, 0, kTileRows);
          for (int i = 0; i < kTileRows; ++i) {
            const int64_t row = panel_rows[i];
            if (row < 0) continue;
            group_scales[i] = scales[(e * w.N + row) * groups + g];
            if (zeros) group_zeros[i] = zeros[(e * w.N + row) * groups + g];
          }
          std::memcpy(dst, group_scales, sizeof group_scales);
        }
        uint8_t* step = dst + f.header_bytes();
        const int64_t per_step = f.bits == 4 ? 2 : 1;
        for (int64_t j = g * G; j < (g + 1) * G; j += per_step, step += kTileRows) {
          for (int i = 0; i < kTileRows; ++i) {
            const int64_t row = panel_rows[i];
            uint32_t byte = 0;
            if (row >= 0) byte = f.bits == 8 ? code(row, j) : code(row, j) | code(row, j + 1) << 4;
            step[i] = static_cast<uint8_t>(byte);
          }
        }
      }
    }
  });
  return m;
}

}  // namespace qmoe::cpu
