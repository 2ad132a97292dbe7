// Upstream bugs (the vLLM WNA16 MoE spec, section 8) about reading a checkpoint's scheme and
// running what the oracle selects for it, as named cases.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "backend/backend.hpp"
#include "format/model_config.hpp"
#include "qmoe/checkpoint.hpp"
#include "qmoe/moe.hpp"
#include "qmoe/oracle.hpp"
#include "support/moe_case.hpp"

namespace qmoe {
namespace {

// #1: `num_bits = (weight_bits,)` made a tuple, so every `bits == 4` test was false and the
// wrong key or backend followed. The scheme read from config.json is exactly (bits, group), for
// every width and group size, for the methods whose config carries bits (moe_wna16 reads GPTQ
// and AWQ checkpoints through these same configs).
TEST(UpstreamRegression, SchemeKeyIsExactForEveryWidthAndGroup) {
  const format::ordered_json model = {{"model_type", "mixtral"},  {"num_local_experts", 8},
                                      {"num_experts_per_tok", 2}, {"hidden_size", 256},
                                      {"intermediate_size", 128}, {"hidden_act", "silu"}};
  struct Method {
    const char* name;
    std::vector<int> widths;
    bool zero_point;
  };
  for (const Method& method : {Method{"gptq", {4, 8}, false}, Method{"awq", {4}, true}}) {
    for (int bits : method.widths) {
      for (int group : {-1, 32, 64, 128}) {
        SCOPED_TRACE(fmt::format("{} bits {} group {}", method.name, bits, group));
        format::ordered_json config = model;
        config["quantization_config"] = {
            {"quant_method", method.name}, {"bits", bits}, {"group_size", group},
            {"desc_act", false},           {"sym", true},  {"zero_point", true}};
        const format::ModelConfig m = format::parse_model_config(config, "config.json");
        EXPECT_EQ(m.quant.scheme.bits, bits);
        EXPECT_EQ(m.quant.scheme.group_size, group == -1 ? kChannelwise : group);
        const std::string key = fmt::format("int{} {} {}", bits,
                                            group == -1 ? "channelwise" : fmt::format("g{}", group),
                                            method.zero_point ? "asym" : "sym");
        EXPECT_EQ(to_string(m.quant.scheme), key);
        // And the oracle sees that key: the layer it describes carries the same scheme.
        EXPECT_EQ(describe(m.quant.scheme, m.moe).w13_scheme, m.quant.scheme);
      }
    }
  }
}

double bound_for(DType dtype) {
  if (dtype == DType::f16) return 1e-5 + 1.0 / 2048;
  if (dtype == DType::bf16) return 1e-5 + 2.0 / 256;
  return 1e-5;
}

// #3: a backend was selectable for MoeWNA16 but had no forward for it (NotImplementedError at
// run time). Every (fixture format x built backend x activation dtype) the oracle accepts on
// this host runs a forward that matches the independent float64 reference.
TEST(UpstreamRegression, EveryBackendTheOracleAcceptsRunsAForward) {
  const DeviceDesc host = host_cpu();
  int runs = 0;
  for (const auto& entry : std::filesystem::directory_iterator(QMOE_TEST_DATA_DIR)) {
    if (!std::filesystem::exists(entry.path() / "config.json")) continue;
    SCOPED_TRACE(entry.path().filename().string());
    const Checkpoint ckpt = Checkpoint::open(entry.path());
    const int layer = ckpt.moe_layers().front();
    for (const Backend* backend : built_backends()) {
      for (DType dtype : {DType::f32, DType::f16, DType::bf16}) {
        SCOPED_TRACE(fmt::format("{} {}", backend->name(), name(dtype)));
        MoEConfig config = ckpt.layer_config(layer);
        config.activation_dtype = dtype;
        std::mt19937_64 rng(7);
        test::MoECase c = test::make_case(config, ckpt.load_layer(layer), 5, dtype, rng);
        // Layers whose outputs leave the f16 range cannot be compared in f16.
        const auto ref = c.reference.span<double>();
        if (dtype == DType::f16 &&
            std::any_of(ref.begin(), ref.end(), [](double v) { return std::fabs(v) > 6e4; }))
          continue;
        if (evaluate(describe(*c.experts, c.config), host, backend->name()).backend.empty())
          continue;
        MoE moe(c.config, *c.experts, std::string(backend->name()));
        Buffer out(dtype, {5, c.config.hidden});
        moe.forward(c.hidden.view(), c.router_logits.view(), out.view());
        EXPECT_LT(test::relative_error(out, c.reference), bound_for(dtype));
        ++runs;
      }
    }
  }
  EXPECT_GT(runs, 0);
}

}  // namespace
}  // namespace qmoe
