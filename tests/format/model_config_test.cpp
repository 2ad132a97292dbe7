// config.json: MoE shape and routing per model family, quantization parameters per method, and
// which modules each method leaves unquantized.
#include <gtest/gtest.h>

#include "format/model_config.hpp"
#include "support/expect_error.hpp"

namespace qmoe::format {
namespace {

using test::expect_error;

ordered_json with_quant(ordered_json model, ordered_json quant) {
  model["quantization_config"] = std::move(quant);
  return model;
}

const ordered_json kGptq = {
    {"quant_method", "gptq"}, {"bits", 4}, {"group_size", 128}, {"desc_act", false}, {"sym", true}};

TEST(ModelConfig, MixtralShapeAndAlwaysRenormalizedSoftmax) {
  const ordered_json c = {{"model_type", "mixtral"},    {"num_local_experts", 8},
                          {"num_experts_per_tok", 2},   {"hidden_size", 4096},
                          {"intermediate_size", 14336}, {"hidden_act", "silu"}};
  const ModelConfig m = parse_model_config(with_quant(c, kGptq), "config.json");
  EXPECT_EQ(m.moe.num_experts, 8);
  EXPECT_EQ(m.moe.top_k(), 2);
  EXPECT_EQ(m.moe.hidden, 4096);
  EXPECT_EQ(m.moe.intermediate, 14336);
  EXPECT_TRUE(m.moe.routing.renormalize);
  EXPECT_EQ(m.moe.routing.scoring, Scoring::softmax);
}

TEST(ModelConfig, QwenMoeUsesMoeIntermediateSizeAndNormTopkProb) {
  const ordered_json c = {{"model_type", "qwen2_moe"}, {"num_experts", 60},
                          {"num_experts_per_tok", 4},  {"hidden_size", 2048},
                          {"intermediate_size", 5632}, {"moe_intermediate_size", 1408},
                          {"norm_topk_prob", false},   {"hidden_act", "silu"}};
  const ModelConfig m = parse_model_config(with_quant(c, kGptq), "config.json");
  EXPECT_EQ(m.moe.num_experts, 60);
  EXPECT_EQ(m.moe.intermediate, 1408);
  EXPECT_FALSE(m.moe.routing.renormalize);
}

TEST(ModelConfig, DeepSeekV3GroupedSigmoidRouting) {
  const ordered_json c = {{"model_type", "deepseek_v3"},
                          {"n_routed_experts", 256},
                          {"num_experts_per_tok", 8},
                          {"hidden_size", 7168},
                          {"moe_intermediate_size", 2048},
                          {"intermediate_size", 18432},
                          {"scoring_func", "sigmoid"},
                          {"n_group", 8},
                          {"topk_group", 4},
                          {"topk_method", "noaux_tc"},
                          {"norm_topk_prob", true},
                          {"routed_scaling_factor", 2.5}};
  const ModelConfig m = parse_model_config(with_quant(c, kGptq), "config.json");
  EXPECT_EQ(m.moe.num_experts, 256);
  EXPECT_EQ(m.moe.routing.scoring, Scoring::sigmoid);
  EXPECT_EQ(m.moe.routing.n_group, 8);
  EXPECT_EQ(m.moe.routing.topk_group, 4);
  EXPECT_FLOAT_EQ(m.moe.routing.routed_scaling_factor, 2.5f);
  EXPECT_TRUE(m.moe.routing.renormalize);
}

TEST(ModelConfig, GreedyTopkIgnoresGroupFields) {
  const ordered_json c = {{"n_routed_experts", 64},  {"num_experts_per_tok", 6},
                          {"hidden_size", 2048},     {"moe_intermediate_size", 1408},
                          {"topk_method", "greedy"}, {"n_group", 8},
                          {"topk_group", 3}};
  const ModelConfig m = parse_model_config(with_quant(c, kGptq), "config.json");
  EXPECT_EQ(m.moe.routing.n_group, 0);
}

// Llama 4 nests the language model in text_config; its router takes the sigmoid of the top-k
// logits without renormalizing and scales the expert input.
TEST(ModelConfig, Llama4TextConfigAndSigmoidOnInputRouting) {
  const ordered_json c = {{"model_type", "llama4"},
                          {"text_config",
                           {{"model_type", "llama4_text"},
                            {"num_local_experts", 16},
                            {"num_experts_per_tok", 1},
                            {"hidden_size", 5120},
                            {"intermediate_size", 8192},
                            {"intermediate_size_mlp", 16384},
                            {"hidden_act", "silu"}}}};
  const ModelConfig m = parse_model_config(with_quant(c, kGptq), "config.json");
  EXPECT_EQ(m.moe.num_experts, 16);
  EXPECT_EQ(m.moe.intermediate, 8192);
  EXPECT_EQ(m.moe.routing.scoring, Scoring::sigmoid);
  EXPECT_FALSE(m.moe.routing.renormalize);
  EXPECT_TRUE(m.moe.apply_router_weight_on_input);
}

TEST(ModelConfig, ErrorsNameTheKey) {
  const ordered_json dense = {{"hidden_size", 64}, {"intermediate_size", 128}};
  expect_error([&] { parse_model_config(with_quant(dense, kGptq), "c.json"); },
               "c.json: no expert count; is this an MoE model? (num_local_experts / num_experts / "
               "n_routed_experts)");
  ordered_json moe = {{"num_experts", 4},
                      {"num_experts_per_tok", 2},
                      {"hidden_size", 64},
                      {"moe_intermediate_size", 32}};
  expect_error([&] { parse_model_config(moe, "c.json"); }, "no quantization_config");
  ordered_json bad_scoring = moe;
  bad_scoring["scoring_func"] = "sparsemixer";
  expect_error([&] { parse_model_config(with_quant(bad_scoring, kGptq), "c.json"); },
               "scoring_func 'sparsemixer' is not supported (valid: softmax, sigmoid)");
  ordered_json fp8 = {{"quant_method", "fp8"}};
  expect_error([&] { parse_model_config(with_quant(moe, fp8), "c.json"); },
               "quant_method 'fp8' is not supported (valid: gptq, awq, compressed-tensors, mxfp4, "
               "quark)");
  moe["num_experts_per_tok"] = "two";
  expect_error([&] { parse_model_config(with_quant(moe, kGptq), "c.json"); },
               "'num_experts_per_tok' must be an integer, got \"two\"");
}

const ordered_json kMoe = {{"num_experts", 4},
                           {"num_experts_per_tok", 2},
                           {"hidden_size", 64},
                           {"moe_intermediate_size", 32}};

QuantConfig quant(const ordered_json& q) {
  return parse_model_config(with_quant(kMoe, q), "c").quant;
}

TEST(GptqConfig, ParametersAndZeroPointConvention) {
  ordered_json q = {{"quant_method", "gptq"}, {"bits", 8},    {"group_size", 32},
                    {"desc_act", true},       {"sym", false}, {"checkpoint_format", "gptq_v2"}};
  const QuantConfig c = quant(q);
  EXPECT_EQ(c.scheme.bits, 8);
  EXPECT_EQ(c.scheme.group_size, 32);
  EXPECT_TRUE(c.scheme.act_order);
  EXPECT_TRUE(c.scheme.has_zero_points());
  EXPECT_EQ(c.gptq_version, 2);
  q.erase("checkpoint_format");
  EXPECT_EQ(quant(q).gptq_version, 1) << "no format field means v1 (z - 1)";
  q["format"] = "gptq_v2";
  EXPECT_EQ(quant(q).gptq_version, 2) << "GPTQModel's canonical key";
  q["format"] = "marlin";
  expect_error([&] { quant(q); }, "GPTQ format 'marlin' is not supported");
}

TEST(GptqConfig, DescActWithChannelwiseScalesIsNoActOrder) {
  const QuantConfig c = quant({{"quant_method", "gptq"},
                               {"bits", 4},
                               {"group_size", -1},
                               {"desc_act", true},
                               {"sym", true}});
  EXPECT_EQ(c.scheme.group_size, kChannelwise);
  EXPECT_FALSE(c.scheme.act_order);
}

TEST(GptqConfig, DynamicExcludesAndOverridesPerModule) {
  const QuantConfig c =
      quant({{"quant_method", "gptq"},
             {"bits", 4},
             {"group_size", 128},
             {"sym", true},
             {"dynamic",
              {{"-:.*mtp\\.", ordered_json::object()},
               {"+:.*layers\\.1\\.mlp\\.experts\\.", {{"bits", 8}, {"group_size", 32}}}}}});
  EXPECT_FALSE(c.scheme_for("model.mtp.layers.0.mlp.experts.0.gate_proj").has_value());
  const auto overridden = c.scheme_for("model.layers.1.mlp.experts.3.up_proj");
  ASSERT_TRUE(overridden.has_value());
  EXPECT_EQ(overridden->bits, 8);
  EXPECT_EQ(overridden->group_size, 32);
  EXPECT_EQ(c.scheme_for("model.layers.2.mlp.experts.3.up_proj")->bits, 4);
}

TEST(AwqConfig, BothKeySpellingsAndGemmOnly) {
  const QuantConfig c = quant({{"quant_method", "awq"},
                               {"w_bit", 4},
                               {"q_group_size", 64},
                               {"zero_point", true},
                               {"version", "GEMM"}});
  EXPECT_EQ(c.scheme.group_size, 64);
  EXPECT_TRUE(c.scheme.has_zero_points());
  expect_error(
      [&] {
        quant({{"quant_method", "awq"}, {"bits", 4}, {"group_size", 64}, {"version", "gemv"}});
      },
      "AWQ version 'gemv' is not supported (valid: gemm)");
  expect_error(
      [&] {
        quant({{"quant_method", "awq"}, {"bits", 8}, {"group_size", 64}});
      },
      "AWQ gemm checkpoints are 4-bit, got bits = 8");
  const QuantConfig skip = quant({{"quant_method", "awq"},
                                  {"bits", 4},
                                  {"group_size", 64},
                                  {"modules_to_not_convert", {"mlp.gate"}}});
  EXPECT_FALSE(skip.scheme_for("model.layers.0.mlp.gate").has_value());
  EXPECT_TRUE(skip.scheme_for("model.layers.0.mlp.experts.0.up_proj").has_value());
}

ordered_json ct(ordered_json weights, ordered_json ignore = ordered_json::array()) {
  return {{"quant_method", "compressed-tensors"},
          {"format", "pack-quantized"},
          {"quantization_status", "compressed"},
          {"ignore", ignore},
          {"config_groups",
           {{"group_0",
             {{"targets", {"Linear"}}, {"weights", weights}, {"input_activations", nullptr}}}}}};
}

TEST(CompressedTensorsConfig, StrategiesAndActorderAliases) {
  ordered_json w = {{"num_bits", 4},       {"type", "int"},    {"symmetric", false},
                    {"strategy", "group"}, {"group_size", 32}, {"actorder", "dynamic"}};
  QuantConfig c = quant(ct(w));
  EXPECT_EQ(c.format, CheckpointFormat::compressed_tensors);
  EXPECT_EQ(c.scheme.group_size, 32);
  EXPECT_TRUE(c.scheme.has_zero_points());
  EXPECT_TRUE(c.scheme.act_order) << "dynamic is an alias of group";
  w["actorder"] = "static";
  EXPECT_FALSE(quant(ct(w)).scheme.act_order) << "static (= weight) stores no g_idx";
  w["actorder"] = true;
  EXPECT_TRUE(quant(ct(w)).scheme.act_order);
  ordered_json channel = {{"num_bits", 8},
                          {"type", "int"},
                          {"symmetric", true},
                          {"strategy", "channel"},
                          {"group_size", nullptr}};
  EXPECT_EQ(quant(ct(channel)).scheme.group_size, kChannelwise);
  channel["strategy"] = "tensor";
  expect_error([&] { quant(ct(channel)); },
               "strategy 'tensor' with group_size -1 is not supported");
}

TEST(CompressedTensorsConfig, RefusesActivationQuantizationAndUncompressedWeights) {
  ordered_json q = ct({{"num_bits", 4}, {"strategy", "group"}, {"group_size", 32}});
  q["config_groups"]["group_0"]["input_activations"] = {{"num_bits", 8}};
  expect_error([&] { quant(q); }, "quantizes activations too; qmoe reads weight-only");
  ordered_json frozen = ct({{"num_bits", 4}, {"strategy", "group"}, {"group_size", 32}});
  frozen["quantization_status"] = "frozen";
  expect_error([&] { quant(frozen); }, "quantization_status 'frozen'");
}

TEST(CompressedTensorsConfig, IgnoreUsesExactNamesAndAnchoredRegexes) {
  const QuantConfig c = quant(ct({{"num_bits", 4}, {"strategy", "group"}, {"group_size", 32}},
                                 {"lm_head", "re:.*mlp.gate$"}));
  EXPECT_FALSE(c.scheme_for("lm_head").has_value());
  EXPECT_FALSE(c.scheme_for("model.layers.0.mlp.gate").has_value());
  EXPECT_TRUE(c.scheme_for("model.layers.0.mlp.gate_proj.x").has_value())
      << "the $ anchors the end";
  EXPECT_TRUE(c.scheme_for("model.layers.0.mlp.experts.0.gate_proj").has_value());
}

}  // namespace
}  // namespace qmoe::format
