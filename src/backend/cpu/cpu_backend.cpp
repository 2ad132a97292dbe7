#include "backend/cpu/cpu_backend.hpp"

#include "backend/cpu/cpu_experts.hpp"
#include "backend/cpu/isa.hpp"
#include "core/check.hpp"

namespace qmoe {

namespace {

using cpu::kHalfRows;

int64_t panels_for(int64_t rows) { return (rows + cpu::kTileRows - 1) / cpu::kTileRows; }

class CpuBackend final : public Backend {
 public:
  std::string_view name() const override { return "cpu"; }

  std::unique_ptr<PreparedExperts> prepare(const QuantizedExperts& experts, const MoEConfig& config,
                                           Device device) const override {
    check(device.kind == DeviceKind::cpu, "backend 'cpu' runs on the CPU, not on {}",
          to_string(device));
    auto p = std::make_unique<cpu::CpuExperts>();
    p->E = experts.num_experts();
    p->H = experts.hidden();
    p->I = experts.intermediate();
    p->gated = is_gated(config.activation);
    p->kernel = cpu::tile_kernel(cpu::selected_isa());
    const int64_t I = p->I;
    if (p->gated) {
      // Pair q holds gate and up rows of the same 16 outputs, so its tile feeds the activation.
      const bool interleaved = config.activation == Activation::swigluoai;
      const int64_t pairs = (I + kHalfRows - 1) / kHalfRows;
      p->w13 = cpu::pack_weight(experts.w13(), "w13", pairs, [&](int64_t slot) -> int64_t {
        const int64_t q = slot / (2 * kHalfRows), i = slot % (2 * kHalfRows);
        const bool up = i >= kHalfRows;
        const int64_t j = q * kHalfRows + (up ? i - kHalfRows : i);
        if (j >= I) return -1;
        if (interleaved) return 2 * j + (up ? 1 : 0);
        return up ? I + j : j;
      });
    } else {
      p->w13 = cpu::pack_weight(experts.w13(), "w13", panels_for(I),
                                [&](int64_t slot) { return slot < I ? slot : int64_t{-1}; });
    }
    const int64_t H = p->H;
    p->w2 = cpu::pack_weight(experts.w2(), "w2", panels_for(H),
                             [&](int64_t slot) { return slot < H ? slot : int64_t{-1}; });
    if (!p->w2.k_order.empty()) {
      p->w2_position.resize(p->w2.k_order.size());
      for (int64_t e = 0; e < p->E; ++e)
        for (int64_t j = 0; j < I; ++j)
          p->w2_position[e * I + p->w2.k_order[e * I + j]] = static_cast<int32_t>(j);
    }
    return p;
  }

  void run(const PreparedExperts& prepared, const MoEConfig& config,
           const RoutedBatch& batch) const override {
    cpu::cpu_forward(static_cast<const cpu::CpuExperts&>(prepared), config, batch);
  }
};

}  // namespace

const Backend& cpu_backend() {
  static const CpuBackend backend;
  return backend;
}

}  // namespace qmoe
