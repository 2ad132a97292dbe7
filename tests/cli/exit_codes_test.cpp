// Exit codes of `qmoe` as scripts see them: 0 ok, 1 a problem in the checkpoint or input, 2 a
// usage error; every error on one line starting "qmoe: error:".
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "cli/checkpoint_edit.hpp"
#include "support/run_cli.hpp"

namespace qmoe::test {
namespace {

const std::string kLayerFlags = "--experts 8 --hidden 256 --intermediate 128";

void expect_error(const CliRun& r, int status, const std::string& message) {
  EXPECT_EQ(r.status, status) << r.out;
  EXPECT_NE(r.out.find("qmoe: error: "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(message), std::string::npos) << "expected '" << message << "' in\n" << r.out;
  EXPECT_EQ(r.out.find("internal error"), std::string::npos) << r.out;
}

TEST(ExitCodes, VersionPrintsTheProjectVersion) {
  const CliRun r = run_cli("--version");
  EXPECT_EQ(r.status, 0);
  EXPECT_EQ(r.out, "qmoe " QMOE_EXPECTED_VERSION "\n");
}

TEST(ExitCodes, UsageErrorsExitWithTwo) {
  TempDir dir("usage");
  const std::string ckpt = dir / "ckpt";
  ASSERT_EQ(run_cli("sample " + ckpt).status, 0);
  const std::pair<std::string, std::string> cases[] = {
      {"", "A subcommand is required"},
      {"frobnicate", "unknown command 'frobnicate' (commands: "},
      {"inspect", "dir is required"},
      {"inspect " + ckpt + " --no-such-flag", "--no-such-flag"},
      {"explain " + kLayerFlags + " --tp 0", "--tp"},
      {"explain " + kLayerFlags + " --ep -2", "--ep"},
      {"explain " + kLayerFlags + " --dtype f8", "--dtype must be"},
      {"explain " + ckpt + " " + kLayerFlags, "not both"},
      {"explain --experts 8", "describe the layer"},
      {"demo --tokens 0", "--tokens"},
      {"demo --device h100", "a device of this machine"},
      {"run " + ckpt + " --layers 7", "--layers: 7 is not an MoE layer"},
      {"run " + ckpt + " --repeats 0", "--repeats"},
      {"sample " + (dir / "x") + " --format nope", "unknown checkpoint format 'nope'"},
      {"sample " + (dir / "x") + " --scheme int3-g128", "--scheme 'int3-g128'"},
      {"sample " + (dir / "x") + " --format mxfp4 --scheme int4-g128", "does not go with"},
      {"sample " + (dir / "x") + " --format moe_wna16 --scheme int4-g128-act-order",
       "without act-order"},
      {"sample " + (dir / "x") + " --scheme int4-g64 --intermediate 96", "must divide"},
  };
  for (const auto& [args, message] : cases) {
    SCOPED_TRACE(args);
    expect_error(run_cli(args), 2, message);
  }
}

TEST(ExitCodes, DeviceNamesIgnoreCase) {
  for (const char* device : {"H100", "Sm_90A", "CPU"}) {
    SCOPED_TRACE(device);
    const CliRun r = run_cli("explain " + kLayerFlags + " --backend emulation --device " +
                             std::string(device) + " --json");
    if (std::string(device) == "CPU") {
      ASSERT_EQ(r.status, 0) << r.out;
      EXPECT_EQ(nlohmann::json::parse(r.out)["device"]["kind"], "cpu");
    } else {
      // emulation is CPU-only: no backend on a GPU, but the device itself was understood.
      EXPECT_EQ(r.status, 1) << r.out;
      EXPECT_EQ(nlohmann::json::parse(
                    r.out.substr(0, r.out.find("\nqmoe: error")))["device"]["compute_capability"],
                90);
    }
  }
}

TEST(ExitCodes, UnknownGpuArchitecturesAreRejected) {
  for (const char* arch : {"sm_999", "sm_91", "sm_10"}) {
    SCOPED_TRACE(arch);
    expect_error(run_cli("explain " + kLayerFlags + " --device " + arch), 2,
                 "unknown GPU architecture '" + std::string(arch) + "'");
  }
  // Known architectures are understood (whether a backend is built for them is another matter).
  for (const char* arch : {"sm_80", "sm_90a", "sm_120"})
    EXPECT_NE(run_cli("explain " + kLayerFlags + " --device " + arch).status, 2) << arch;
}

TEST(ExitCodes, MissingDirectoryIsAnOrdinaryErrorNamingThePath) {
  expect_error(run_cli("inspect /nonexistent/qmoe-model"), 1, "/nonexistent/qmoe-model");
}

TEST(ExitCodes, FilesystemErrorsNameThePathAndAreNotInternal) {
  TempDir dir("fs");
  { std::ofstream(dir / "file") << "x"; }
  expect_error(run_cli("sample " + (dir / "file") + "/model"), 1, dir / "file");
}

TEST(ExitCodes, InspectExitsOneWhenALayerDoesNotLoadAndNamesTheLayerOnce) {
  TempDir dir("broken");
  ASSERT_EQ(run_cli("sample " + (dir / "c")).status, 0);
  set_config(dir.path() / "c", "num_experts", 9);  // expert 8 is in no file
  const CliRun r = run_cli("inspect " + (dir / "c"));
  expect_error(r, 1, "2 problems in the checkpoint");
  EXPECT_NE(r.out.find("layer 0 does not load: expert module"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("load: layer 0"), std::string::npos) << r.out;
}

TEST(ExitCodes, NanBiasAndE8m0NanScaleAreProblems) {
  TempDir dir("nan");
  const std::filesystem::path c = dir.path() / "c";
  ASSERT_EQ(run_cli("sample " + c.string() + " --format mxfp4").status, 0);
  ASSERT_EQ(run_cli("inspect " + c.string()).status, 0);
  const std::filesystem::path file = c / "model.safetensors";
  // bf16 NaN (0x7fc0, little-endian) as the third bias of layer 0's w2, e8m0 0xff as a scale.
  overwrite_tensor_bytes(file, "model.layers.0.mlp.experts.down_proj_bias", 4,
                         {std::byte{0xc0}, std::byte{0x7f}});
  overwrite_tensor_bytes(file, "model.layers.1.mlp.experts.gate_up_proj_scales", 17,
                         {std::byte{0xff}});
  const CliRun r = run_cli("inspect " + c.string());
  expect_error(r, 1, "2 problems in the checkpoint");
  EXPECT_NE(r.out.find("layer 0 w2: 1 NaN/Inf bias value"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("layer 1 w13: 1 NaN/Inf scale"), std::string::npos) << r.out;
  const CliRun json = run_cli("inspect " + c.string() + " --json");
  EXPECT_EQ(json.status, 1);
  const nlohmann::json j = nlohmann::json::parse(json.out.substr(0, json.out.find("\nqmoe:")));
  EXPECT_EQ(j["problems"], 2);
  EXPECT_EQ(j["layers"][0]["w2"]["nonfinite_bias"], 1);
  EXPECT_EQ(j["layers"][1]["w13"]["nonfinite_scales"], 1);
}

TEST(ExitCodes, ZeroScaleIsAFindingButNotAProblem) {
  TempDir dir("zero");
  const std::filesystem::path c = dir.path() / "c";
  ASSERT_EQ(run_cli("sample " + c.string()).status, 0);
  overwrite_tensor_bytes(c / "model.safetensors", "model.layers.1.mlp.experts.2.up_proj.scales", 6,
                         {std::byte{0}, std::byte{0}});
  const CliRun r = run_cli("inspect " + c.string());
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("layer 1 w13: 1 zero scale(s)"), std::string::npos) << r.out;
}

TEST(ExitCodes, EveryLayerTheConfigDeclaresMustExist) {
  TempDir dir("declared");
  const std::filesystem::path c = dir.path() / "c";
  ASSERT_EQ(run_cli("sample " + c.string()).status, 0);
  set_config(c, "num_hidden_layers", 4);
  set_config(c, "first_k_dense_replace", 1);  // MoE layers 1, 2, 3: 2 and 3 are missing
  const CliRun r = run_cli("inspect " + c.string());
  expect_error(r, 1, "2 problems in the checkpoint");
  EXPECT_NE(r.out.find("layer 3 is an MoE layer by config.json but no file holds its experts"),
            std::string::npos)
      << r.out;
  set_config(c, "decoder_sparse_step", 2);  // MoE layers 1 and 3: 3 is missing
  expect_error(run_cli("inspect " + c.string()), 1, "1 problem in the checkpoint");
  set_config(c, "num_hidden_layers", 2);  // MoE layer 1 only: all there
  EXPECT_EQ(run_cli("inspect " + c.string()).status, 0);
}

TEST(ExitCodes, ExplainExitsOneWhenNoBackendCanRunALayer) {
  TempDir dir("nobackend");
  const std::filesystem::path c = dir.path() / "c";
  ASSERT_EQ(run_cli("sample " + c.string() + " --format mxfp4").status, 0);
  // MXFP4 runs on the emulation only, which is never picked automatically.
  expect_error(run_cli("explain " + c.string() + " --device cpu"), 1,
               "no backend can run layers 0-1 on");
  EXPECT_EQ(run_cli("explain " + c.string() + " --device cpu --backend emulation").status, 0);
}

}  // namespace
}  // namespace qmoe::test
