// Checkpoint::open / load_layer on directories that are wrong in one way each.
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <vector>

#include "format/inspect.hpp"
#include "format/model_config.hpp"
#include "format/module_pattern.hpp"
#include "format/safetensors_writer.hpp"
#include "format_case.hpp"
#include "qmoe/checkpoint.hpp"
#include "support/expect_error.hpp"

namespace qmoe {
namespace {

using format::ordered_json;
using test::edit_config;
using test::expect_error;

QuantScheme gptq_int4(bool act_order = false) {
  QuantScheme s;
  s.group_size = 16;
  s.act_order = act_order;
  return s;
}

// A 3-expert, one-layer checkpoint in `dir`.
MoEConfig write_small(const std::filesystem::path& dir, const WriteOptions& options = {},
                      const QuantScheme& scheme = gptq_int4()) {
  const MoEConfig config = test::small_config();
  std::vector<QuantizedExperts> layers;
  layers.push_back(test::random_experts(3, 64, 32, scheme, false, 3));
  write_checkpoint(dir, config, layers, options);
  return config;
}

// Adds one [2, 2] tensor in a file of its own (every *.safetensors file is read).
void add_tensor(const std::filesystem::path& dir, const std::string& name, format::StDType dtype) {
  format::SafetensorsWriter w;
  const std::vector<std::byte> data(static_cast<size_t>(4 * format::size_of(dtype)), std::byte{1});
  w.add(name, dtype, {2, 2}, data);
  w.write(dir / "extra.safetensors");
}

TEST(Checkpoint, QuantizedRouterIsRefused) {
  test::ScratchDir dir("ckpt");
  write_small(dir.path());
  add_tensor(dir.path(), "model.layers.0.mlp.gate.qweight", format::StDType::i32);
  const Checkpoint ckpt = Checkpoint::open(dir.path());
  expect_error([&] { ckpt.load_layer(0); },
               "layer 0: the router 'model.layers.0.mlp.gate' is stored quantized "
               "('model.layers.0.mlp.gate.qweight'); the router must stay in float");
}

TEST(Checkpoint, MissingExpertIsNamed) {
  test::ScratchDir dir("ckpt");
  write_small(dir.path());
  edit_config(dir.path(), [](ordered_json& c) { c["num_experts"] = 4; });
  expect_error([&] { Checkpoint::open(dir.path()).load_layer(0); },
               "layer 0: expert module 'model.layers.0.mlp.experts.3.gate_proj' is missing");
}

TEST(Checkpoint, MoreExpertTensorsThanTheConfigSays) {
  test::ScratchDir dir("ckpt");
  write_small(dir.path());
  edit_config(dir.path(), [](ordered_json& c) { c["num_experts"] = 2; });
  expect_error([&] { Checkpoint::open(dir.path()); },
               "layer 0 has tensors for expert 2 but config.json says 2 experts");
}

TEST(Checkpoint, UnquantizedExpertIsRefused) {
  test::ScratchDir dir("ckpt");
  write_small(dir.path());
  edit_config(dir.path(), [](ordered_json& c) { c["num_experts"] = 4; });
  add_tensor(dir.path(), "model.layers.0.mlp.experts.3.gate_proj.weight", format::StDType::f16);
  expect_error([&] { Checkpoint::open(dir.path()).load_layer(0); },
               "expert module 'model.layers.0.mlp.experts.3.gate_proj' is stored unquantized");
}

TEST(Checkpoint, ExpertsIgnoredByTheConfigAreRefused) {
  test::ScratchDir dir("ckpt");
  write_small(dir.path(), {.format = CheckpointFormat::compressed_tensors});
  edit_config(dir.path(), [](ordered_json& c) {
    c["quantization_config"]["ignore"].push_back("re:.*experts\\.1\\.");
  });
  const Checkpoint ckpt = Checkpoint::open(dir.path());
  expect_error([&] { ckpt.load_layer(0); },
               "expert module 'model.layers.0.mlp.experts.1.gate_proj' is left unquantized by the "
               "quantization config");
}

// "re:(.*)*X" in an ignore list made `qmoe inspect` run until killed: std::regex backtracked
// exponentially on every expert module name. RE2 matches in linear time; a build without it
// refuses the pattern (it has a group). The bound (1 s) is far above the milliseconds this layer
// takes.
TEST(Checkpoint, BacktrackingModulePatternsDoNotHangTheLoader) {
  for (const CheckpointFormat format :
       {CheckpointFormat::compressed_tensors, CheckpointFormat::gptq}) {
    test::ScratchDir dir("ckpt");
    write_small(dir.path(), {.format = format});
    edit_config(dir.path(), [](ordered_json& c) {
      ordered_json& q = c["quantization_config"];
      if (q["quant_method"] == "gptq") {
        q["dynamic"]["-:(.*)*X"] = ordered_json::object();
      } else {
        q["ignore"].push_back("re:(.*)*X");
      }
    });
    const auto start = std::chrono::steady_clock::now();
    std::string error;  // of opening the checkpoint or of its layer
    try {
      error = format::inspect(Checkpoint::open(dir.path())).layers.at(0).error;
    } catch (const Error& e) {
      error = e.what();
    }
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(1)) << error;
    if (format::module_regexes_supported()) {
      EXPECT_EQ(error, "");
    } else {
      EXPECT_NE(error.find("needs RE2, which this qmoe was built without"), std::string::npos)
          << error;
    }
  }
}

TEST(Checkpoint, LayerWithoutExperts) {
  test::ScratchDir dir("ckpt");
  write_small(dir.path());
  expect_error([&] { Checkpoint::open(dir.path()).load_layer(5); },
               "layer 5 has no experts (MoE layers: 0)");
}

TEST(Checkpoint, DirectoryWithoutExperts) {
  test::ScratchDir dir("ckpt");
  write_small(dir.path());
  std::filesystem::remove(dir.path() / "model.safetensors");
  add_tensor(dir.path(), "model.layers.0.mlp.up_proj.qweight", format::StDType::i32);
  expect_error([&] { Checkpoint::open(dir.path()); }, "no expert tensors (looked for");
}

TEST(Checkpoint, MoeWna16RefusesDescAct) {
  test::ScratchDir dir("ckpt");
  write_small(dir.path(), {}, gptq_int4(true));
  EXPECT_TRUE(Checkpoint::open(dir.path()).scheme().act_order);
  expect_error([&] { Checkpoint::open(dir.path(), {.as_moe_wna16 = true}); },
               "moe_wna16 reads GPTQ only without desc_act");
}

TEST(Checkpoint, MoeWna16RefusesCompressedTensors) {
  test::ScratchDir dir("ckpt");
  write_small(dir.path(), {.format = CheckpointFormat::compressed_tensors});
  expect_error([&] { Checkpoint::open(dir.path(), {.as_moe_wna16 = true}); },
               "moe_wna16 reads GPTQ or AWQ checkpoints, this one is compressed-tensors");
}

TEST(Checkpoint, WriterRefusesToOverwrite) {
  test::ScratchDir dir("ckpt");
  write_small(dir.path());
  expect_error([&] { write_small(dir.path()); }, "already holds a checkpoint");
}

TEST(Checkpoint, WriterRefusesAwqActOrderAndInt8) {
  test::ScratchDir a("ckpt"), b("ckpt");
  expect_error([&] { write_small(a.path(), {.format = CheckpointFormat::awq}, gptq_int4(true)); },
               "AWQ gemm holds int4 without act-order");
  QuantScheme int8 = gptq_int4();
  int8.bits = 8;
  expect_error([&] { write_small(b.path(), {.format = CheckpointFormat::awq}, int8); },
               "AWQ gemm holds int4 without act-order, not int8 g16 sym");
}

TEST(Checkpoint, LayerConfigCarriesTheRouterCorrectionBias) {
  test::ScratchDir dir("ckpt");
  write_small(dir.path());
  EXPECT_TRUE(Checkpoint::open(dir.path()).layer_config(0).routing.correction_bias.empty());
  format::SafetensorsWriter w;
  const std::vector<float> bias{0.5f, -1.25f, 2.0f};
  w.add<float>("model.layers.0.mlp.gate.e_score_correction_bias", format::StDType::f32, {3}, bias);
  w.write(dir.path() / "router.safetensors");
  const Checkpoint ckpt = Checkpoint::open(dir.path());
  EXPECT_EQ(ckpt.layer_config(0).routing.correction_bias, bias);
  EXPECT_TRUE(ckpt.moe_config().routing.correction_bias.empty()) << "per layer, not global";
  expect_error([&] { ckpt.layer_config(1); }, "layer 1 has no experts (MoE layers: 0)");
}

// Older AutoGPTQ checkpoints keep the parameters in quantize_config.json, without quant_method.
TEST(Checkpoint, QuantizeConfigJsonFallback) {
  test::ScratchDir dir("ckpt");
  write_small(dir.path(), {.gptq_version = 1});
  ordered_json quant;
  edit_config(dir.path(), [&](ordered_json& c) {
    quant = c["quantization_config"];
    c.erase("quantization_config");
  });
  quant.erase("quant_method");
  std::ofstream(dir.path() / "quantize_config.json") << quant.dump();
  const Checkpoint ckpt = Checkpoint::open(dir.path());
  EXPECT_EQ(ckpt.format_kind(), CheckpointFormat::gptq);
  EXPECT_EQ(to_string(ckpt.scheme()), "int4 g16 sym");
  EXPECT_EQ(ckpt.load_layer(0).num_experts(), 3);
}

// Dense layers, shared experts and attention are not routed experts and do not disturb them.
TEST(Checkpoint, OnlyRoutedExpertsCount) {
  test::ScratchDir dir("ckpt");
  write_small(dir.path());
  format::SafetensorsWriter w;
  const std::vector<int32_t> word(4, 0x77777777);
  for (const char* name : {"model.layers.5.mlp.gate_proj.qweight",
                           "model.layers.0.mlp.shared_expert.gate_proj.qweight",
                           "model.layers.0.mlp.shared_experts.up_proj.qweight",
                           "model.layers.0.self_attn.q_proj.qweight"}) {
    w.add<int32_t>(name, format::StDType::i32, {2, 2}, word);
  }
  w.write(dir.path() / "other.safetensors");
  const Checkpoint ckpt = Checkpoint::open(dir.path());
  EXPECT_EQ(ckpt.moe_layers(), (std::vector<int>{0}));
  EXPECT_EQ(ckpt.load_layer(0).num_experts(), 3);
}

// Llama 4 / Jamba / LFM2 keep experts under feed_forward (LFM2 with Mixtral's w1/w2/w3 names), and
// the router is feed_forward.router: the tensors are renamed here from a written checkpoint.
TEST(Checkpoint, FeedForwardBlockAndRouterName) {
  test::ScratchDir written("ckpt"), renamed("ckpt");
  const MoEConfig config = write_small(written.path(), {.naming = ExpertNaming::mixtral});
  std::filesystem::copy_file(written.path() / "config.json", renamed.path() / "config.json");
  const format::TensorStore store = format::TensorStore::open(written.path());
  format::SafetensorsWriter w;
  for (const auto& [name, t] : store.tensors()) {
    std::string to = name;
    to.replace(to.find("block_sparse_moe"), std::string("block_sparse_moe").size(), "feed_forward");
    w.add(to, t.dtype, t.shape, t.bytes);
  }
  w.write(renamed.path() / "model.safetensors");
  const Checkpoint original = Checkpoint::open(written.path());
  const Checkpoint ckpt = Checkpoint::open(renamed.path());
  EXPECT_EQ(ckpt.naming(), ExpertNaming::mixtral);
  test::expect_identical(ckpt.load_layer(0), original.load_layer(0));
  EXPECT_EQ(config.num_experts, 3);

  add_tensor(renamed.path(), "model.layers.0.feed_forward.router.qweight", format::StDType::i32);
  expect_error([&] { Checkpoint::open(renamed.path()).load_layer(0); },
               "the router 'model.layers.0.feed_forward.router' is stored quantized");
}

TEST(Checkpoint, FormatNames) {
  for (auto f :
       {CheckpointFormat::gptq, CheckpointFormat::awq, CheckpointFormat::compressed_tensors,
        CheckpointFormat::moe_wna16, CheckpointFormat::mxfp4, CheckpointFormat::quark}) {
    EXPECT_EQ(parse_checkpoint_format(name(f)), f);
  }
  expect_error(
      [] { parse_checkpoint_format("gguf"); },
      "unknown checkpoint format 'gguf' (valid: gptq, awq, compressed-tensors, moe_wna16, mxfp4, "
      "quark)");
}

}  // namespace
}  // namespace qmoe
