// AMD Quark OCP-MX checkpoints (src/format/quark.cpp): the fixtures Quark itself exported
// (tests/data/make_quark_fixture.py) decode to exactly the library's values, and the
// quantization_config rules (exclude, layer_quant_config, what is refused) on edited configs.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <functional>

#include "format/json_fields.hpp"
#include "format/module_pattern.hpp"
#include "format/safetensors_writer.hpp"
#include "format_case.hpp"
#include "library_reference.hpp"
#include "qmoe/checkpoint.hpp"
#include "support/expect_error.hpp"

namespace qmoe::format {
namespace {

using test::expect_error;

QuantScheme mxfp4(ActivationQuant activations = ActivationQuant::none) {
  QuantScheme s{
      .kind = WeightKind::mxfp4, .bits = 4, .group_size = 32, .source_scale_dtype = DType::u8};
  s.activation_quant = activations;
  return s;
}

TEST(QuarkLibraryFixtures, DequantizeExactlyAsTheLibraryDoes) {
  const std::pair<const char*, ActivationQuant> fixtures[] = {
      {"quark-library-mxfp4", ActivationQuant::none},
      {"quark-library-mxfp4-w4a4", ActivationQuant::mxfp4_even}};
  for (const auto& [name, activations] : fixtures) {
    SCOPED_TRACE(name);
    const std::filesystem::path dir = std::filesystem::path(QMOE_TEST_DATA_DIR) / name;
    const Checkpoint ckpt = Checkpoint::open(dir);
    EXPECT_EQ(ckpt.format_kind(), CheckpointFormat::quark);
    EXPECT_EQ(ckpt.scheme(), mxfp4(activations)) << to_string(ckpt.scheme());
    ASSERT_EQ(ckpt.moe_layers(), std::vector<int>{0});
    const QuantizedExperts experts = ckpt.load_layer(0);
    ASSERT_NO_FATAL_FAILURE(test::expect_gated_layer(experts, 3, 96, 64));
    test::expect_layer_matches_library(experts, TensorStore::open(dir / "reference"));
  }
}

// MoE layers 0..n-1 of 3 experts (H 64, I 32) written by qmoe's quark writer.
std::vector<QuantizedExperts> write_layers(const std::filesystem::path& dir, int n,
                                           const QuantScheme& scheme = mxfp4()) {
  std::vector<QuantizedExperts> layers;
  for (int l = 0; l < n; ++l)
    layers.push_back(test::random_experts(3, 64, 32, scheme, false, 21 + l));
  write_checkpoint(dir, test::small_config(), layers, {.format = CheckpointFormat::quark});
  return layers;
}

void edit_quant(const std::filesystem::path& dir, const std::function<void(ordered_json&)>& edit) {
  test::edit_config(dir, [&](ordered_json& c) { edit(c["quantization_config"]); });
}

// Layer 1's experts as float tensors, the way an excluded layer is stored.
void add_float_layer_one(const std::filesystem::path& dir) {
  SafetensorsWriter w;
  const std::vector<float> zeros(64 * 32, 0.0f);
  for (int e = 0; e < 3; ++e) {
    for (const char* proj : {"gate_proj", "up_proj", "down_proj"}) {
      const bool down = std::string(proj) == "down_proj";
      w.add<float>(fmt::format("model.layers.1.mlp.experts.{}.{}.weight", e, proj), StDType::f32,
                   {down ? 64 : 32, down ? 32 : 64}, zeros);
    }
  }
  w.write(dir / "float_layer.safetensors");
}

TEST(Quark, ExcludedMoELayerIsNeverReadAsQuantized) {
  test::ScratchDir dir("quark");
  write_layers(dir.path(), 1);
  add_float_layer_one(dir.path());
  // Not excluded: the config calls layer 1 quantized, but its float weights have no e8m0 scales,
  // and qmoe refuses it rather than read float bytes as codes.
  expect_error([&] { Checkpoint::open(dir.path()).load_layer(1); },
               "model.layers.1.mlp.experts.0.gate_proj.weight_scale");
  edit_quant(dir.path(), [](ordered_json& q) { q["exclude"].push_back("model.layers.1.*"); });
  const Checkpoint ckpt = Checkpoint::open(dir.path());
  EXPECT_NO_THROW(ckpt.load_layer(0));
  expect_error([&] { ckpt.load_layer(1); },
               "expert module 'model.layers.1.mlp.experts.0.gate_proj' is left unquantized by "
               "the quantization config");
}

TEST(Quark, RouterIsFloatWhateverTheExcludeListSays) {
  test::ScratchDir dir("quark");
  const std::vector<QuantizedExperts> layers = write_layers(dir.path(), 1);
  // A config whose exclude list forgets the router (upstream: router weights quantized by
  // mistake): qmoe never reads the router as a quantized module, so the layer loads as written.
  edit_quant(dir.path(), [](ordered_json& q) { q["exclude"] = ordered_json::array(); });
  SafetensorsWriter w;
  const std::vector<float> router(3 * 64, 0.5f);
  w.add<float>("model.layers.0.mlp.gate.weight", StDType::f32, {3, 64}, router);
  w.write(dir.path() / "router.safetensors");
  test::expect_identical(Checkpoint::open(dir.path()).load_layer(0), layers[0]);
  // A router stored quantized (weight + weight_scale) is refused, excluded or not.
  SafetensorsWriter q;
  const std::vector<uint8_t> scale(3 * 2, 127);
  q.add<uint8_t>("model.layers.0.mlp.gate.weight_scale", StDType::u8, {3, 2}, scale);
  q.write(dir.path() / "router_scale.safetensors");
  expect_error([&] { Checkpoint::open(dir.path()).load_layer(0); },
               "the router 'model.layers.0.mlp.gate' is stored quantized");
}

TEST(Quark, LayerQuantConfigOverridesTheGlobalScheme) {
  test::ScratchDir dir("quark");
  write_layers(dir.path(), 2);  // the tensors of W4A16 and W4A4 are the same; the config differs
  edit_quant(dir.path(), [](ordered_json& q) {
    ordered_json w4a4 = q["global_quant_config"];
    w4a4["input_tensors"] = w4a4["weight"];
    w4a4["input_tensors"]["is_dynamic"] = true;
    q["layer_quant_config"] = {{"model.layers.1.mlp.experts.*", w4a4}};
  });
  const Checkpoint ckpt = Checkpoint::open(dir.path());
  EXPECT_EQ(ckpt.load_layer(0).w13().scheme, mxfp4());
  EXPECT_EQ(ckpt.load_layer(1).w13().scheme, mxfp4(ActivationQuant::mxfp4));
}

// input_tensors' scale_calculation_mode picks the activation scale rule; Quark writes "even" when
// not told otherwise, and a config without the field means the same.
TEST(Quark, ActivationScaleRuleFollowsScaleCalculationMode) {
  const std::pair<const char*, ActivationQuant> modes[] = {{"even", ActivationQuant::mxfp4_even},
                                                           {"floor", ActivationQuant::mxfp4},
                                                           {nullptr, ActivationQuant::mxfp4_even}};
  for (const auto& [mode, rule] : modes) {
    SCOPED_TRACE(mode ? mode : "(absent)");
    test::ScratchDir dir("quark");
    write_layers(dir.path(), 1);
    edit_quant(dir.path(), [mode = mode](ordered_json& q) {
      ordered_json& input = q["global_quant_config"]["input_tensors"];
      input = q["global_quant_config"]["weight"];
      input["is_dynamic"] = true;
      if (mode)
        input["scale_calculation_mode"] = mode;
      else
        input.erase("scale_calculation_mode");
    });
    EXPECT_EQ(Checkpoint::open(dir.path()).load_layer(0).w13().scheme, mxfp4(rule));
  }
}

struct Refusal {
  const char* name;
  std::function<void(ordered_json&)> edit;
  const char* message;
};

TEST(Quark, UnsupportedSchemesAreRefusedWithWhatIsValid) {
  const Refusal refusals[] = {
      {"int4 weights",
       [](ordered_json& q) { q["global_quant_config"]["weight"]["dtype"] = "int4"; },
       "global_quant_config.weight: dtype 'int4' is not supported (valid: dtype fp4"},
      {"fp8 activations",
       [](ordered_json& q) {
         q["global_quant_config"]["input_tensors"] = {{"dtype", "fp8_e4m3"},
                                                      {"qscheme", "per_tensor"}};
       },
       "input_tensors: dtype 'fp8_e4m3' is not supported (valid: null (W4A16), or dtype fp4"},
      {"Quark's ceil rule",
       [](ordered_json& q) {
         q["global_quant_config"]["input_tensors"] = q["global_quant_config"]["weight"];
         q["global_quant_config"]["input_tensors"]["is_dynamic"] = true;
         q["global_quant_config"]["input_tensors"]["scale_calculation_mode"] = "ceil";
       },
       "scale_calculation_mode 'ceil' is not supported (valid: null (W4A16), or dtype fp4"},
      {"static fp4 activations",
       [](ordered_json& q) {
         q["global_quant_config"]["input_tensors"] = q["global_quant_config"]["weight"];
       },
       "static activation scales are not supported"},
      {"group of 16",
       [](ordered_json& q) { q["global_quant_config"]["weight"]["group_size"] = 16; },
       "group_size 16 is not supported"},
      {"output quantization",
       [](ordered_json& q) {
         q["global_quant_config"]["output_tensors"] = q["global_quant_config"]["weight"];
       },
       "quantizes output_tensors too"},
      {"layer types",
       [](ordered_json& q) {
         q["layer_type_quant_config"] = {{"Linear", q["global_quant_config"]}};
       },
       "layer_type_quant_config: per-layer-type overrides are not supported"},
      {"no global config", [](ordered_json& q) { q.erase("global_quant_config"); },
       "missing global_quant_config"},
      {"exclude not a list", [](ordered_json& q) { q["exclude"] = "lm_head"; },
       "exclude: must be a list"},
  };
  for (const Refusal& r : refusals) {
    SCOPED_TRACE(r.name);
    test::ScratchDir dir("quark");
    write_layers(dir.path(), 1);
    edit_quant(dir.path(), r.edit);
    expect_error([&] { Checkpoint::open(dir.path()); }, r.message);
  }
}

}  // namespace
}  // namespace qmoe::format
