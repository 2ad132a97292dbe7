// `qmoe explain` end to end: the CLI run on a checkpoint written by write_checkpoint and on layers
// described by flags, its JSON compared with what the oracle itself answers.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include <unistd.h>

#include "backend/backend.hpp"
#include "data/fixture_spec.hpp"
#include "layers.hpp"
#include "oracle/forward_cost.hpp"
#include "qmoe/checkpoint.hpp"
#include "qmoe/error.hpp"
#include "qmoe/oracle.hpp"
#include "support/moe_case.hpp"
#include "support/run_cli.hpp"

namespace qmoe {
namespace {

using test::CliRun;
using test::run_cli;

// The JSON report, checking the exit code: 0, or 1 when no backend can run the layer (then
// stderr's one-line error follows the JSON and is cut off before parsing).
nlohmann::json run_json(const std::string& args, int expected_status = 0) {
  const CliRun r = run_cli(args + " --json");
  EXPECT_EQ(r.status, expected_status) << r.out;
  const size_t error = r.out.find("\nqmoe: error: ");
  if (expected_status != 0) {
    EXPECT_NE(r.out.find("qmoe: error: no backend can run"), std::string::npos) << r.out;
  }
  return nlohmann::json::parse(r.out.substr(0, error));
}

// A two-layer checkpoint of one format and scheme, in a fresh temporary directory.
struct Fixture {
  const char* name;
  CheckpointFormat format;  // moe_wna16: a GPTQ checkpoint read with --moe-wna16
  QuantScheme scheme;
  bool bias = false;
};

void PrintTo(const Fixture& f, std::ostream* os) { *os << f.name; }

class ExplainCheckpoint : public testing::TestWithParam<Fixture> {
 protected:
  void SetUp() override {
    const Fixture& f = GetParam();
    dir_ = std::filesystem::temp_directory_path() /
           (std::string("qmoe_explain_") + std::to_string(::getpid()) + "_" + f.name);
    std::filesystem::remove_all(dir_);
    const test::CaseSpec spec{
        .E = 4, .H = 64, .I = 32, .M = 1, .top_k = 2, .scheme = f.scheme, .bias = f.bias};
    test::CaseSpec other = spec;
    other.seed = 2;
    const test::MoECase a = test::make_case(spec), b = test::make_case(other);
    config_ = a.config;
    std::vector<QuantizedExperts> layers;
    layers.push_back(a.experts->clone());
    layers.push_back(b.experts->clone());
    // f32 scales: the quantizer's scales are not all representable in f16.
    WriteOptions options{.scale_dtype = DType::f32};
    options.format = f.format == CheckpointFormat::moe_wna16 ? CheckpointFormat::gptq : f.format;
    write_checkpoint(dir_, config_, layers, options);
    args_ = "explain " + dir_.string() +
            (f.format == CheckpointFormat::moe_wna16 ? " --moe-wna16" : "");
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::filesystem::path dir_;
  std::string args_;
  MoEConfig config_;
};

TEST_P(ExplainCheckpoint, ReportsTheOraclesChoiceForEveryLayer) {
  const Selection expected = evaluate(describe(GetParam().scheme, config_), host_cpu());
  const nlohmann::json j = run_json(args_, expected.error.empty() ? 0 : 1);
  ASSERT_EQ(j["groups"].size(), 1u);
  const nlohmann::json& g = j["groups"][0];
  EXPECT_EQ(g["layers"], nlohmann::json({0, 1}));
  EXPECT_NE(g["source"].get<std::string>().find(std::string(name(GetParam().format))),
            std::string::npos)
      << g["source"];
  EXPECT_EQ(g["chosen"].is_null() ? "" : g["chosen"].get<std::string>(), expected.backend);
  ASSERT_EQ(g["backends"].size(), expected.verdicts.size());
  for (size_t i = 0; i < expected.verdicts.size(); ++i) {
    EXPECT_EQ(g["backends"][i]["name"], expected.verdicts[i].backend);
    EXPECT_EQ(g["backends"][i]["reason"], expected.verdicts[i].reason);
  }
}

TEST_P(ExplainCheckpoint, AnswersForAHandDescribedGpu) {
  LayerDesc layer = describe(GetParam().scheme, config_);
  layer.activation_dtype = DType::bf16;
  const Selection expected = evaluate(layer, parse_device("h100"));
  const nlohmann::json j =
      run_json(args_ + " --device h100 --dtype bf16", expected.error.empty() ? 0 : 1);
  const nlohmann::json& g = j["groups"][0];
  EXPECT_EQ(j["device"]["compute_capability"], 90);
  EXPECT_EQ(g["chosen"].is_null() ? "" : g["chosen"].get<std::string>(), expected.backend);
  EXPECT_EQ(g.value("error", std::string()), expected.error);
  // The checkpoint's two MoE layers hold twice one layer's bytes.
  if (expected.error.empty()) {
    EXPECT_GT(g["default_weight_bytes"].get<int64_t>(), 0);
    EXPECT_EQ(g["default_weight_bytes_all_layers"], 2 * g["default_weight_bytes"].get<int64_t>());
  }
}

TEST_P(ExplainCheckpoint, LayerFlagsAndADirectoryDoNotMix) {
  const CliRun r = run_cli(args_ + " --experts 4");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.out.find("not both"), std::string::npos) << r.out;
}

INSTANTIATE_TEST_SUITE_P(
    Formats, ExplainCheckpoint,
    testing::Values(
        Fixture{"gptq_int4_g32", CheckpointFormat::gptq, test::int_scheme(4, 32)},
        Fixture{"gptq_int8_channelwise_asym", CheckpointFormat::gptq,
                test::int_scheme(8, kChannelwise, true)},
        Fixture{"gptq_int4_act_order", CheckpointFormat::gptq,
                test::int_scheme(4, 16, false, true)},
        Fixture{"awq_int4_g32_bias", CheckpointFormat::awq, test::int_scheme(4, 32, true), true},
        Fixture{"compressed_tensors_int8_g16_asym", CheckpointFormat::compressed_tensors,
                test::int_scheme(8, 16, true)},
        Fixture{"moe_wna16_int8_g16", CheckpointFormat::moe_wna16, test::int_scheme(8, 16)}));

// The committed fixtures (tests/data), on real and described devices: the JSON is the oracle's
// verdict on the checkpoint's scheme and shape, and the table prints.
TEST(ExplainFixtures, EveryFixtureOnEveryDeviceMatchesTheOracle) {
  for (const fixtures::FixtureSpec& spec : fixtures::fixture_specs()) {
    SCOPED_TRACE(spec.dir);
    const std::string dir = std::string(QMOE_FIXTURES) + "/" + spec.dir;
    const Checkpoint ckpt = Checkpoint::open(dir);
    for (const char* device : {"cpu", "cpu:generic", "a100", "h100"}) {
      SCOPED_TRACE(device);
      const Selection expected =
          evaluate(describe(ckpt.scheme(), ckpt.moe_config()), parse_device(device));
      const nlohmann::json g = run_json("explain " + dir + " --device " + device,
                                        expected.error.empty() ? 0 : 1)["groups"][0];
      EXPECT_EQ(g["layers"], nlohmann::json(ckpt.moe_layers()));
      EXPECT_EQ(g["chosen"].is_null() ? "" : g["chosen"].get<std::string>(), expected.backend);
      EXPECT_EQ(g.value("error", std::string()), expected.error);
      ASSERT_EQ(g["backends"].size(), expected.verdicts.size());
      for (size_t i = 0; i < expected.verdicts.size(); ++i)
        EXPECT_EQ(g["backends"][i]["reason"], expected.verdicts[i].reason);
    }
    const CliRun table = run_cli("explain " + dir);
    const bool runs_here =
        evaluate(describe(ckpt.scheme(), ckpt.moe_config()), host_cpu()).error.empty();
    EXPECT_EQ(table.status, runs_here ? 0 : 1) << table.out;
    EXPECT_NE(table.out.find("layers 0-1 (" + std::string(ckpt.format()) + " checkpoint"),
              std::string::npos)
        << table.out;
  }
}

TEST(ExplainFlags, TableNamesTheChosenAndEveryRejectedBackend) {
  const CliRun r = run_cli(
      "explain --experts 8 --hidden 256 --intermediate 128 --device cpu:generic "
      "--backend emulation");
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("emulation   chosen"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("cpu         rejected  needs a CPU with x86-64"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("cuda-wgmma  rejected  runs on CUDA GPUs"), std::string::npos) << r.out;
}

TEST(ExplainFlags, Sm90ShowsTheTwoKernelPlanWhenCudaWgmmaIsBuilt) {
  // A Qwen3-30B-A3B layer: large enough that cuda-wgmma's cost model wins from some batch on.
  const std::string layer =
      "explain --experts 128 --hidden 2048 --intermediate 768 --top-k 8 --device h100";
  const CliRun r = run_cli(layer + " --dtype bf16");
  if (find_backend("cuda-wgmma")) {
    EXPECT_EQ(r.status, 0) << r.out;
    const std::string from = std::to_string(modelled_crossover_tokens(
        test::descriptor("cuda-mma"), test::descriptor("cuda-wgmma"), test::base_layer()));
    EXPECT_NE(r.out.find("plan: cuda-mma    below " + from + " tokens"), std::string::npos)
        << r.out;
    EXPECT_NE(r.out.find("plan: cuda-wgmma  from " + from + " tokens"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("cuda-wgmma  planned   compatible: runs batches of " + from + " tokens"),
              std::string::npos)
        << r.out;
    const nlohmann::json j = run_json(layer);
    EXPECT_EQ(j["groups"][0]["plan"][1]["from_tokens"], std::stoi(from));
    // cuda-wgmma reads cuda-mma's int4 codes, w13 [128 x 1536 x 2048] = 201326592 B and w2
    // [128 x 2048 x 768] = 100663296 B, and adds its bf16 scales: 16 groups of w13 (128 x 16 x
    // 1536 x 2 = 6291456 B) and 6 of w2 (128 x 6 x 2048 x 2 = 3145728 B)
    EXPECT_EQ(j["groups"][0]["plan"][1]["shared_bytes"], 201326592 + 100663296);
    EXPECT_EQ(j["groups"][0]["plan"][1]["weight_bytes"], 6291456 + 3145728);
    EXPECT_EQ(j["groups"][0]["plan"][0]["weight_bytes"], 0);
    // The default plan holds cuda-mma's copy and what cuda-wgmma adds to it.
    EXPECT_EQ(j["groups"][0]["default_weight_bytes"],
              j["groups"][0]["weight_bytes"].get<int64_t>() + 6291456 + 3145728);
    EXPECT_NE(r.out.find("weights held by default: 321 MB per layer"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("reads cuda-mma's int4 codes (302 MB) and adds 9.44 MB of its own "
                         "(MoEConfig::large_batch_backend = false leaves it out)"),
              std::string::npos)
        << r.out;
    // zero points: f32 zero terms next to the scales, 128 x 16 x 1536 x 6 = 18874368 B for w13 and
    // 128 x 6 x 2048 x 6 = 9437184 B for w2, still a few percent of cuda-mma's bytes
    const nlohmann::json with_zp = run_json(layer + " --zp");
    EXPECT_EQ(with_zp["groups"][0]["plan"][1]["weight_bytes"], 18874368 + 9437184);
    // with act-order the codes are not in the shared order: a copy of its own, with biases (f32)
    // and w13's int32 channel order: w13 201326592 + 18874368, w2 100663296 + 9437184, biases 128
    // x 1536 x 4 = 786432 and 128 x 2048 x 4 = 1048576, channel order 128 x 2048 x 4 = 1048576;
    // more than a quarter of the first copy, so prepared only when asked
    const CliRun all = run_cli(layer + " --dtype bf16 --zp --bias --act-order");
    EXPECT_NE(all.out.find("only when asked: keeps its own copy of the weights, 333 MB, more than "
                           "25% of the first's bytes"),
              std::string::npos)
        << all.out;
    const nlohmann::json with_all = run_json(layer + " --zp --bias --act-order");
    ASSERT_EQ(with_all["groups"][0]["plan"].size(), 2u) << with_all.dump();
    EXPECT_EQ(with_all["groups"][0]["plan"][1]["shared_bytes"], 0);
    // A second copy is opt-in: the default plan holds cuda-mma's alone.
    EXPECT_EQ(with_all["groups"][0]["default_weight_bytes"], with_all["groups"][0]["weight_bytes"]);
    EXPECT_EQ(with_all["groups"][0]["plan"][1]["weight_bytes"],
              201326592 + 18874368 + 100663296 + 9437184 + 786432 + 1048576 + 1048576);
  } else {
    EXPECT_EQ(r.out.find("plan:"), std::string::npos) << r.out;
  }
}

// --batched: the layer's forwards take the batched-experts format. Every backend lists the formats
// it takes; on an H100 cuda-wgmma is rejected for the format, so there is no plan.
TEST(ExplainFlags, BatchedShowsTheFormatsAndRejectsBackendsWithoutIt) {
  const std::string layer = "explain --experts 16 --hidden 256 --intermediate 128 --device h100";
  const int status = find_backend("cuda-mma") ? 0 : 1;  // 1: nothing built runs it
  const CliRun r = run_cli(layer + " --batched");
  EXPECT_EQ(r.status, status) << r.out;
  EXPECT_NE(r.out.find("cuda-wgmma  rejected  does not take the batched_experts activation format"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find("plan:"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("; takes standard, batched_experts"), std::string::npos) << r.out;
  const nlohmann::json j = run_json(layer + " --batched", status);
  const nlohmann::json& g = j["groups"][0];
  EXPECT_EQ(g["activation_format"], "batched_experts");
  EXPECT_EQ(g["chosen"].is_null() ? "" : g["chosen"].get<std::string>(),
            find_backend("cuda-mma") ? "cuda-mma" : "");
  for (const nlohmann::json& b : g["backends"]) {
    const bool takes = b["name"] != "cuda-wgmma";
    EXPECT_EQ(b["activation_formats"].size(), takes ? 2u : 1u) << b;
  }
}

TEST(ExplainFlags, IncompatiblePreferenceIsReportedNotSwapped) {
  const nlohmann::json j =
      run_json("explain --experts 8 --hidden 96 --intermediate 48 --group 3 --backend cpu", 1);
  const nlohmann::json& g = j["groups"][0];
  EXPECT_TRUE(g["chosen"].is_null());
  EXPECT_NE(g["error"].get<std::string>().find("Backends that would: emulation"),
            std::string::npos);
}

TEST(ExplainFlags, ShardsAreJudgedAsRankZeroSees) {
  // No backend is chosen (cpu cannot, emulation is never automatic): exit code 1.
  const nlohmann::json j = run_json(
      "explain --experts 8 --hidden 256 --intermediate 128 --group 32 --act-order --tp 2 "
      "--device cpu:avx2,fma",
      1);
  const nlohmann::json& g = j["groups"][0];
  EXPECT_EQ(g["shard"]["tp"], 2);
  // The act-order w2 shard keeps full-K scales: the cpu backend declares it cannot run that.
  bool seen = false;
  for (const nlohmann::json& b : g["backends"]) {
    if (b["name"] != "cpu") continue;
    seen = true;
    EXPECT_NE(b["reason"].get<std::string>().find("act-order shard split on K"), std::string::npos);
  }
  EXPECT_TRUE(seen);
}

// Every rank of the plan gets its own verdict: here each holds 4 of the 8 experts and half the
// channels, and cpu takes each shard; its weight bytes are a quarter of the layer's.
TEST(ExplainFlags, EveryRankOfTheShardPlanIsListed) {
  const nlohmann::json whole =
      run_json("explain --experts 8 --hidden 256 --intermediate 128 --group 32 --device cpu", 0);
  const nlohmann::json j = run_json(
      "explain --experts 8 --hidden 256 --intermediate 128 --group 32 --tp 2 --ep 2 --device cpu",
      0);
  const nlohmann::json& ranks = j["groups"][0]["shard"]["ranks"];
  ASSERT_EQ(ranks.size(), 4u);
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(ranks[size_t(r)]["rank"], r);
    EXPECT_EQ(ranks[size_t(r)]["first_expert"], r / 2 * 4);
    EXPECT_EQ(ranks[size_t(r)]["first_channel"], r % 2 * 64);
    EXPECT_EQ(ranks[size_t(r)]["backend"], "cpu");
    EXPECT_EQ(4 * ranks[size_t(r)]["weight_bytes"].get<int64_t>(),
              whole["groups"][0]["weight_bytes"].get<int64_t>());
  }
}

TEST(ExplainFlags, UnshardableTpIsAnErrorListingTheSizesThatWork) {
  const CliRun r = run_cli(
      "explain --experts 8 --hidden 256 --intermediate 96 --group 32 "
      "--tp 2");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.out.find("TP sizes that work: 1, 3"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace qmoe
