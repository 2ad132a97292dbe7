#include "backend/cpu/cpu_backend.hpp"

#include <functional>

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
    check_experts_match_config(config, experts);
    return pack(experts.w13(), experts.w2(), config, device, [] {});
  }

  std::unique_ptr<PreparedExperts> prepare_owned(QuantizedExperts experts, const MoEConfig& config,
                                                 Device device) const override {
    check_experts_match_config(config, experts);
    auto [w13, w2] = std::move(experts).release();
    return pack(w13, w2, config, device, [&w13] { w13 = QuantizedWeight(); });
  }

  void run(const PreparedExperts& prepared, const MoEConfig& config,
           const RoutedBatch& batch) const override {
    cpu::cpu_forward(static_cast<const cpu::CpuExperts&>(prepared), config, batch);
  }

  void run_batched(const PreparedExperts& prepared, const MoEConfig& config,
                   const BatchedBatch& batch) const override {
    cpu::cpu_forward_batched(static_cast<const cpu::CpuExperts&>(prepared), config, batch);
  }

 private:
  // Packs w13, calls w13_packed (after which w13 is not read again: it may be freed), packs w2.
  static std::unique_ptr<PreparedExperts> pack(const QuantizedWeight& w13,
                                               const QuantizedWeight& w2, const MoEConfig& config,
                                               Device device,
                                               const std::function<void()>& w13_packed) {
    check(device.kind == DeviceKind::cpu, "backend 'cpu' runs on the CPU, not on {}",
          to_string(device));
    auto p = std::make_unique<cpu::CpuExperts>();
    p->E = w13.E;
    p->H = w13.K;
    p->I = w2.K;
    p->gated = is_gated(config.activation);
    p->kernel = cpu::tile_kernel(cpu::selected_isa());
    const int64_t I = p->I;
    if (p->gated) {
      // Pair q holds gate and up rows of the same 16 outputs, so its tile feeds the activation.
      const bool interleaved = config.activation == Activation::swigluoai;
      const int64_t pairs = (I + kHalfRows - 1) / kHalfRows;
      p->w13 = cpu::pack_weight(w13, "w13", pairs, [&](int64_t slot) -> int64_t {
        const int64_t q = slot / (2 * kHalfRows), i = slot % (2 * kHalfRows);
        const bool up = i >= kHalfRows;
        const int64_t j = q * kHalfRows + (up ? i - kHalfRows : i);
        if (j >= I) return -1;
        if (interleaved) return 2 * j + (up ? 1 : 0);
        return up ? I + j : j;
      });
    } else {
      p->w13 = cpu::pack_weight(w13, "w13", panels_for(I),
                                [&](int64_t slot) { return slot < I ? slot : int64_t{-1}; });
    }
    w13_packed();
    const int64_t H = p->H;
    p->w2 = cpu::pack_weight(w2, "w2", panels_for(H),
                             [&](int64_t slot) { return slot < H ? slot : int64_t{-1}; });
    if (!p->w2.k_order.empty()) {
      p->w2_position.resize(p->w2.k_order.size());
      for (int64_t e = 0; e < p->E; ++e)
        for (int64_t j = 0; j < I; ++j)
          p->w2_position[e * I + p->w2.k_order[e * I + j]] = static_cast<int32_t>(j);
    }
    return p;
  }
};

}  // namespace

const Backend& cpu_backend() {
  static const CpuBackend backend;
  return backend;
}

}  // namespace qmoe
