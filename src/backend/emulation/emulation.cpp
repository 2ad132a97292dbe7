#include "backend/emulation/emulation.hpp"

#include "backend/emulation/dense_forward.hpp"
#include "core/check.hpp"

namespace qmoe {

namespace {

struct EmulationExperts final : PreparedExperts {
  DequantizedExperts weights;
};

class EmulationBackend final : public Backend {
 public:
  std::string_view name() const override { return "emulation"; }

  std::unique_ptr<PreparedExperts> prepare(const QuantizedExperts& experts, const MoEConfig& config,
                                           Device device) const override {
    check(device.kind == DeviceKind::cpu, "backend 'emulation' runs on the CPU, not on {}",
          to_string(device));
    check_experts_match_config(config, experts);
    auto prepared = std::make_unique<EmulationExperts>();
    prepared->weights = dequantize(experts);
    return prepared;
  }

  void run(const PreparedExperts& prepared, const MoEConfig& config,
           const RoutedBatch& batch) const override {
    dense_moe_forward<float>(static_cast<const EmulationExperts&>(prepared).weights, config, batch);
  }

  void run_batched(const PreparedExperts& prepared, const MoEConfig& config,
                   const BatchedBatch& batch) const override {
    dense_batched_forward(static_cast<const EmulationExperts&>(prepared).weights, config, batch);
  }
};

}  // namespace

const Backend& emulation_backend() {
  static const EmulationBackend backend;
  return backend;
}

}  // namespace qmoe
