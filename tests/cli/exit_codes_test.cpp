// Exit codes of `qmoe` as scripts see them: 0 ok, 1 a problem in the checkpoint or input, 2 a
// usage error; every error on one line starting "qmoe: error:".
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>

#include "cli/checkpoint_edit.hpp"
#include "support/run_cli.hpp"

namespace qmoe::test {
namespace {

const std::string kLayerFlags = "--experts 8 --hidden 256 --intermediate 128";
// A checkpoint only the emulation reference runs: 4-bit groups of 3 fill no whole bytes (cpu)
// and are no multiple of 32 (the CUDA backends).
const std::string kEmulationOnlySample =
    " --format gptq --scheme int4-g3 --hidden 96 --intermediate 48";

// The error is the last line of the output, and only one line.
void expect_error(const CliRun& r, int status, const std::string& message) {
  EXPECT_EQ(r.status, status) << r.out;
  const size_t at = r.out.find("qmoe: error: ");
  ASSERT_NE(at, std::string::npos) << r.out;
  EXPECT_EQ(r.out.find('\n', at), r.out.size() - 1) << "not one line:\n" << r.out.substr(at);
  EXPECT_NE(r.out.find(message, at), std::string::npos) << "expected '" << message << "' in\n"
                                                        << r.out;
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
      {"", "no command given (commands: bench, demo, explain, "},
      {"--bogus", "unknown flag '--bogus' before the command (commands: bench, demo, "},
      {"frobnicate", "unknown command 'frobnicate' (commands: "},
      {"inspect", "dir is required"},
      {"inspect " + ckpt + " --no-such-flag", "--no-such-flag"},
      {"explain " + kLayerFlags + " --tp 0", "--tp: 0 is not valid (valid: an integer >= 1)"},
      {"explain " + kLayerFlags + " --ep -2", "--ep: -2 is not valid (valid: an integer >= 1)"},
      {"explain " + kLayerFlags + " --backend nope",
       "--backend: 'nope' is not a backend (valid: auto, cpu, emulation, "},
      {"run " + ckpt + " --backend nope", "--backend: 'nope' is not a backend (valid: auto, "},
      {"demo --backend nope", "--backend: 'nope' is not a backend"},
      {"bench --shape 256,128,8,2 --backend cpu,nope", "--backend: 'nope' is not a backend"},
      {"run " + ckpt + " --tokens -1", "--tokens: -1 is not valid (valid: an integer >= 1)"},
      {"verify " + ckpt + " --tokens x", "--tokens: x is not valid (valid: an integer >= 1)"},
      {"bench --m 0", "--m: 0 is not valid (valid: an integer >= 1)"},
      {"bench --seconds 0", "--seconds: 0 is not valid (valid: a number > 0)"},
      {"run " + ckpt + " --threads 0", "--threads: 0 is not valid (valid: 1..1024)"},
      {"bench --threads 2000", "--threads: 2000 is not valid (valid: 1..1024)"},
      {"sample " + (dir / "x") + " --layers 65", "--layers: 65 is not valid (valid: 1..64)"},
      {"run " + ckpt + " --tokens 100000000",
       "--tokens 100000000: the tokens' buffers (hidden states, router logits, routing, output "
       "and the float64 reference) take "},
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
      {"sample " + ckpt, ckpt + " already holds a checkpoint; give --force to replace it"},
  };
  for (const auto& [args, message] : cases) {
    SCOPED_TRACE(args);
    expect_error(run_cli(args), 2, message);
  }
}

TEST(ExitCodes, TooManyTokensSayWhatFits) {
  TempDir dir("tokens");
  ASSERT_EQ(run_cli("sample " + (dir / "c")).status, 0);
  const CliRun r = run_cli("run " + (dir / "c") + " --tokens 100000000");
  expect_error(r, 2, " of memory is available: up to about ");
  const std::regex what(
      "--tokens 100000000: the tokens' buffers \\(.*\\) take [0-9.]+ [GT]B \\([0-9.]+ kB a "
      "token\\), "
      "and [0-9.]+ [kMGT]?B of memory is available: up to about [0-9]+ tokens fit\\n$");
  EXPECT_TRUE(std::regex_search(r.out, what)) << r.out;
}

// A format that cannot store the scheme is refused before anything is created, naming the flags.
TEST(ExitCodes, SampleRefusesASchemeTheFormatCannotStoreBeforeWriting) {
  TempDir dir("awq8");
  const std::string target = dir / "x";
  for (const char* args :
       {"--format awq --scheme int8-g32-asym", "--format awq --scheme int4-g32-act-order",
        "--scheme int4-channelwise --hidden 100 --intermediate 64"}) {
    SCOPED_TRACE(args);
    const CliRun r = run_cli("sample " + target + " " + args);
    expect_error(r, 2, "cannot store --scheme ");
    EXPECT_FALSE(std::filesystem::exists(target)) << r.out;
  }
  expect_error(run_cli("sample " + target + " --format awq --scheme int8-g32-asym"), 2,
               "--format awq cannot store --scheme int8-g32-asym (--hidden 512, --intermediate "
               "256): gate_proj: AWQ gemm holds int4 without act-order, not int8 g32 asym");
}

// Errors the library words over several lines (the oracle's reasons) come out as one line.
TEST(ExitCodes, NoBackendForAnAutoRunIsOneLine) {
  TempDir dir("g3run");
  ASSERT_EQ(run_cli("sample " + (dir / "c") + kEmulationOnlySample).status, 0);
  expect_error(run_cli("run " + (dir / "c")), 1,
               "no backend can run this layer (int4 g3 sym, E=8 H=96 I=48 top-2 silu) on host "
               "CPU");
  expect_error(run_cli("demo --model " + (dir / "c")), 1, "ask for backend 'emulation'");
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

TEST(ExitCodes, NanBiasIsAProblem) {
  TempDir dir("nan");
  const std::filesystem::path c = dir.path() / "c";
  ASSERT_EQ(run_cli("sample " + c.string() + " --format mxfp4").status, 0);
  ASSERT_EQ(run_cli("inspect " + c.string()).status, 0);
  // bf16 NaN (0x7fc0, little-endian) as the third bias of layer 0's w2.
  overwrite_tensor_bytes(c / "model.safetensors", "model.layers.0.mlp.experts.down_proj_bias", 4,
                         {std::byte{0xc0}, std::byte{0x7f}});
  const CliRun r = run_cli("inspect " + c.string());
  expect_error(r, 1, "1 problem in the checkpoint");
  EXPECT_NE(r.out.find("layer 0 w2: 1 NaN/Inf bias value"), std::string::npos) << r.out;
  const CliRun json = run_cli("inspect " + c.string() + " --json");
  EXPECT_EQ(json.status, 1);
  const nlohmann::json j = nlohmann::json::parse(json.out.substr(0, json.out.find("\nqmoe:")));
  EXPECT_EQ(j["problems"], 1);
  EXPECT_EQ(j["layers"][0]["w2"]["nonfinite_bias"], 1);
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

// run and explain do what they can, then exit 1 naming the layers no file holds, as verify does.
TEST(ExitCodes, RunAndExplainFailOnLayersNoFileHolds) {
  TempDir dir("declared_run");
  const std::filesystem::path c = dir.path() / "c";
  ASSERT_EQ(run_cli("sample " + c.string()).status, 0);
  set_config(c, "num_hidden_layers", 4);  // MoE layers 0..3: 2 and 3 are missing
  const std::string missing =
      c.string() + ": layers 2-3 are MoE layers by config.json but no file holds their experts";
  for (const std::string& command : {"run " + c.string() + " --tokens 1", "explain " + c.string(),
                                     "explain " + c.string() + " --json"}) {
    SCOPED_TRACE(command);
    const CliRun r = run_cli(command);
    expect_error(r, 1, missing);
    EXPECT_EQ(r.out.find("qmoe: error:"), r.out.rfind("qmoe: error:")) << r.out;
  }
  const CliRun ran = run_cli("run " + c.string() + " --tokens 1");
  EXPECT_NE(ran.out.find("layer 1: cpu on cpu"), std::string::npos) << ran.out;
  expect_error(
      run_cli("run " + c.string() + " --tokens 1 --layers 1,3"), 1,
      c.string() + ": layer 3 is an MoE layer by config.json but no file holds its experts");
  EXPECT_EQ(run_cli("run " + c.string() + " --tokens 1 --layers 1").status, 0);
  const CliRun json = run_cli("explain " + c.string() + " --json");
  const nlohmann::json j = nlohmann::json::parse(json.out.substr(0, json.out.find("\nqmoe:")));
  EXPECT_EQ(j["problems"].size(), 1u) << j.dump(2);
}

// A NaN scale is a problem for every command that reads the checkpoint, explain included: an f16
// NaN in a GPTQ checkpoint, and e8m0's NaN code 0xff in a gpt-oss one, named by its checkpoint
// tensor, row and block.
TEST(ExitCodes, NanScaleFailsEveryCommand) {
  struct Case {
    std::string format, tensor;
    size_t offset;
    std::vector<std::byte> bytes;
    std::string message;
  };
  const Case cases[] = {
      {"gptq",
       "model.layers.1.mlp.experts.2.up_proj.scales",
       6,
       {std::byte{0x00}, std::byte{0x7e}},
       "is nan"},
      // Byte 17 of [8 experts, 512 rows, 16 blocks]: expert 0, stored row 1, block 1.
      {"mxfp4",
       "model.layers.1.mlp.experts.gate_up_proj_scales",
       17,
       {std::byte{0xff}},
       "model.layers.1.mlp.experts.gate_up_proj_scales (U8[8, 512, 16] in model.safetensors): "
       "expert 0, row 1 (up channel 0), block 1 (k 32..63) is 0xff, the e8m0 NaN (valid: "
       "0x00..0xfe"},
  };
  for (const Case& t : cases) {
    SCOPED_TRACE(t.format);
    TempDir dir("nanscale_" + t.format);
    const std::filesystem::path c = dir.path() / "c";
    ASSERT_EQ(run_cli("sample " + c.string() + " --format " + t.format).status, 0);
    overwrite_tensor_bytes(c / "model.safetensors", t.tensor, t.offset, t.bytes);
    for (const char* command : {"inspect", "verify", "run", "explain"}) {
      SCOPED_TRACE(command);
      const CliRun r = run_cli(std::string(command) + " " + c.string());
      EXPECT_EQ(r.status, 1) << r.out;
      EXPECT_NE(r.out.find(t.message), std::string::npos) << r.out;
    }
    expect_error(run_cli("explain " + c.string()), 1, c.string() + ": layer 1 does not load");
    expect_error(run_cli("run " + c.string()), 1, c.string() + ": layer 1 does not load");
  }
}

// AutoGPTQ's overwritten zero points (a fixture its own packer wrote): reported and read as 0 by
// default, refused by every command that reads the layer when --strict-zeros is given.
TEST(ExitCodes, StrictZerosRefusesZeroPointsAutoGptqOverwrote) {
  const std::string fixture =
      std::string(QMOE_TEST_DATA_DIR) + "/gptq-library-int4-g32-asym-zero-overflow";
  const CliRun loose = run_cli("inspect " + fixture);
  EXPECT_EQ(loose.status, 0) << loose.out;
  EXPECT_NE(loose.out.find("were overwritten by a zero point of 0"), std::string::npos)
      << loose.out;
  for (const char* command : {"inspect", "verify", "run", "explain"}) {
    SCOPED_TRACE(command);
    const CliRun r = run_cli(std::string(command) + " " + fixture + " --strict-zeros");
    EXPECT_EQ(r.status, 1) << r.out;
    EXPECT_NE(r.out.find("refused by strict_zeros"), std::string::npos) << r.out;
  }
}

TEST(ExitCodes, ExplainExitsOneWhenNoBackendCanRunALayer) {
  TempDir dir("nobackend");
  const std::filesystem::path c = dir.path() / "c";
  ASSERT_EQ(run_cli("sample " + c.string() + kEmulationOnlySample).status, 0);
  // Groups of 3 4-bit codes run on the emulation only, which is never picked automatically.
  expect_error(run_cli("explain " + c.string() + " --device cpu"), 1,
               "no backend can run layers 0-1 on");
  EXPECT_EQ(run_cli("explain " + c.string() + " --device cpu --backend emulation").status, 0);
}

}  // namespace
}  // namespace qmoe::test
