#pragma once
// prepare's repacking of one canonical weight [E, N, K] into the panel streams of
// panel_format.hpp, once. Which canonical row each panel slot holds is the caller's choice (w13
// pairs gate and up rows so one tile feeds the activation); act-order becomes a permutation of K
// applied here to the weights and, per forward, to the activations.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "backend/cpu/huge_page_bytes.hpp"
#include "backend/cpu/panel_format.hpp"
#include "qmoe/quant.hpp"

namespace qmoe::cpu {

struct PackedMatrix {
  PanelFormat format;
  int64_t E = 0, K = 0;
  int64_t panels = 0;   // per expert, of kTileRows rows each
  HugePageBytes bytes;  // [E, panels, panel_bytes]
  // f32 [E, panels * kTileRows] in slot order (0 in padding slots); empty without bias.
  std::vector<float> bias;
  // i32 [E, K]: packed position j holds canonical input channel k_order[e * K + j]. Empty
  // without act-order (the identity).
  std::vector<int32_t> k_order;

  const uint8_t* panel(int64_t e, int64_t p) const {
    return bytes.data() + (e * panels + p) * format.panel_bytes();
  }
  const float* bias_of(int64_t e) const {
    return bias.empty() ? nullptr : bias.data() + e * panels * kTileRows;
  }
  const int32_t* k_order_of(int64_t e) const {
    return k_order.empty() ? nullptr : k_order.data() + e * K;
  }
  int64_t bytes_per_expert() const { return panels * format.panel_bytes(); }
};

// row_of_slot(s): the canonical row held by slot s (0 <= s < panels * kTileRows), or -1 for a
// padding row (zero weights). `what` names the weight in errors ("w13"). Throws Error for
// schemes the cpu kernels do not run (odd 4-bit group sizes, act-order groups of unequal size).
PackedMatrix pack_weight(const QuantizedWeight& w, const std::string& what, int64_t panels,
                         const std::function<int64_t(int64_t)>& row_of_slot);

}  // namespace qmoe::cpu
