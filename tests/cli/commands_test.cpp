// `qmoe sample`, `verify` and `run` end to end: every format sample inspects and verifies clean,
// run's outputs on given inputs match a float64 reference computed here, and failures exit 1.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <regex>
#include <set>
#include <sstream>

#include "cli/checkpoint_edit.hpp"
#include "format/mapped_file.hpp"
#include "format/safetensors.hpp"
#include "format/safetensors_writer.hpp"
#include "qmoe/checkpoint.hpp"
#include "qmoe/device.hpp"
#include "support/moe_case.hpp"
#include "support/run_cli.hpp"

namespace qmoe::test {
namespace {

struct Sample {
  const char* format;
  const char* scheme;  // empty: the format's default
  const char* expected_scheme;
};

void PrintTo(const Sample& s, std::ostream* os) { *os << s.format << " " << s.scheme; }

class SampleFormats : public testing::TestWithParam<Sample> {};

TEST_P(SampleFormats, InspectAndVerifyAcceptWhatSampleWrites) {
  const Sample& s = GetParam();
  TempDir dir("sample");
  const std::string ckpt = dir / "c";
  const std::string scheme = *s.scheme ? std::string(" --scheme ") + s.scheme : "";
  const CliRun wrote = run_cli("sample " + ckpt + " --format " + s.format + scheme);
  ASSERT_EQ(wrote.status, 0) << wrote.out;
  EXPECT_NE(wrote.out.find("2 layers of 8 experts"), std::string::npos) << wrote.out;
  const std::string as = std::string(s.format) == "moe_wna16" ? " --moe-wna16" : "";

  const CliRun inspected = run_cli("inspect " + ckpt + as + " --json");
  ASSERT_EQ(inspected.status, 0) << inspected.out;
  const nlohmann::json j = nlohmann::json::parse(inspected.out);
  EXPECT_EQ(j["format"], s.format);
  EXPECT_EQ(j["scheme"], s.expected_scheme);
  EXPECT_EQ(j["layers"].size(), 2u);
  EXPECT_TRUE(j["findings"].empty()) << j["findings"];

  const CliRun verified = run_cli("verify " + ckpt + as);
  EXPECT_EQ(verified.status, 0) << verified.out;
  // One row per layer and backend that can run it on this CPU; the emulation runs everything.
  for (int layer : {0, 1}) {
    const std::regex emulation_row(
        "\\n +" + std::to_string(layer) +
        "  emulation +cpu +f32 +[0-9.e+-]+ +5.0e-03 +[0-9.]+ [mµ]?s +ok");
    EXPECT_TRUE(std::regex_search(verified.out, emulation_row)) << verified.out;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Cli, SampleFormats,
    testing::Values(Sample{"gptq", "", "int4 g128 sym"},
                    Sample{"gptq", "int8-g32-asym", "int8 g32 asym"},
                    Sample{"gptq", "int4-g64-act-order", "int4 g64 sym act-order"},
                    Sample{"awq", "", "int4 g128 asym"},
                    Sample{"compressed-tensors", "int4-channelwise", "int4 channelwise sym"},
                    Sample{"moe_wna16", "int8-g128", "int8 g128 sym"},
                    Sample{"mxfp4", "", "mxfp4"}));

// --input / --output: the cpu backend's outputs for given hidden states and router logits, checked
// against the float64 dense forward of the checkpoint's dequantized layer.
TEST(Run, OutputsOnGivenInputsMatchTheFloat64Reference) {
  TempDir dir("run");
  const std::string ckpt = dir / "c";
  ASSERT_EQ(run_cli("sample " + ckpt +
                    " --scheme int4-g64-asym --experts 6 --hidden 192 "
                    "--intermediate 128 --top-k 3")
                .status,
            0);
  const Checkpoint opened = Checkpoint::open(ckpt);
  const int64_t M = 7, H = 192, E = 6;
  std::mt19937_64 rng(41);
  Buffer hidden(DType::f32, {M, H}), logits(DType::f32, {M, E});
  fill_normal(hidden, rng);
  fill_normal(logits, rng);
  format::SafetensorsWriter in;
  in.add<float>("hidden", format::StDType::f32, {M, H}, hidden.span<float>());
  in.add<float>("router_logits", format::StDType::f32, {M, E}, logits.span<float>());
  in.write(dir / "in.safetensors");

  const CliRun r = run_cli("run " + ckpt + " --backend cpu --device cpu --input " +
                           (dir / "in.safetensors") + " --output " + (dir / "out.safetensors"));
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("layer 1: cpu on cpu, 7 tokens in f32"), std::string::npos) << r.out;

  const format::MappedFile out_file(dir / "out.safetensors");
  const format::SafetensorsContents out = format::parse_safetensors(out_file.bytes(), "out");
  ASSERT_EQ(out.tensors.size(), 2u);
  for (int layer : {0, 1}) {
    Buffer h(DType::f32, {M, H}), l(DType::f32, {M, E});
    std::copy_n(hidden.span<float>().begin(), M * H, h.span<float>().begin());
    std::copy_n(logits.span<float>().begin(), M * E, l.span<float>().begin());
    const MoECase c =
        make_case(opened.layer_config(layer), opened.load_layer(layer), std::move(h), std::move(l));
    const format::TensorInfo& t = out.tensors[static_cast<size_t>(layer)];
    ASSERT_EQ(t.name, "layers." + std::to_string(layer) + ".out");
    ASSERT_EQ(t.shape, (std::vector<int64_t>{M, H}));
    Buffer got(DType::f32, {M, H});
    std::memcpy(got.data(), t.bytes.data(), t.bytes.size());
    // f32 accumulation against f64: well inside 1e-4 at K <= 192.
    EXPECT_LT(relative_error(got, c.reference), 1e-4) << "layer " << layer;
  }
}

TEST(Run, SaysOneTokenAndTimesInAReadableUnit) {
  TempDir dir("run1");
  ASSERT_EQ(run_cli("sample " + (dir / "c")).status, 0);
  const CliRun r = run_cli("run " + (dir / "c") + " --tokens 1 --layers 1");
  ASSERT_EQ(r.status, 0) << r.out;
  const std::regex line(
      "layer 1: cpu on cpu, 1 token in f32: [0-9.]+ (ns|µs|ms|s) per forward, [0-9.]+ [kMG]?B/s "
      "of weights, [0-9.e+-]+ TFLOP/s, rel. error [0-9.e+-]+ \\(bound 5.0e-03\\)\\n");
  EXPECT_TRUE(std::regex_search(r.out, line)) << r.out;
  EXPECT_EQ(r.out.find('\r'), std::string::npos) << "a progress line outside a terminal";
}

TEST(Verify, FailsWhenABackendsOutputIsNotFinite) {
  TempDir dir("verify_nan");
  const std::filesystem::path c = dir.path() / "c";
  ASSERT_EQ(run_cli("sample " + c.string() + " --format mxfp4").status, 0);
  // A NaN in every expert's first w2 bias: whatever the routing, the output holds NaN.
  for (int e = 0; e < 8; ++e) {
    overwrite_tensor_bytes(c / "model.safetensors", "model.layers.1.mlp.experts.down_proj_bias",
                           static_cast<size_t>(e) * 512 * 2, {std::byte{0xc0}, std::byte{0x7f}});
  }
  const CliRun r = run_cli("verify " + c.string());
  EXPECT_EQ(r.status, 1) << r.out;
  // Every backend of the machine (cpu and emulation here) fails on layer 1, and the summary
  // counts them.
  int failed = 0;
  for (size_t at = r.out.find("FAIL: error above the bound"); at != std::string::npos;
       at = r.out.find("FAIL: error above the bound", at + 1))
    ++failed;
  EXPECT_GE(failed, 2) << r.out;
  EXPECT_NE(r.out.find(fmt::format("qmoe: error: {}: {} checks failed", c.string(), failed)),
            std::string::npos)
      << r.out;
}

// inspect --tp / --ep: what each rank reads of a layer. Expert-parallel ranks read their experts'
// tensors only, TP ranks their channels' part of them (and each the small g_idx of gate and up
// whole), so each of the four reads a little over a quarter of the layer.
TEST(Inspect, ShowsWhatEachRankReads) {
  TempDir dir("inspect_shards");
  const std::filesystem::path c = dir.path() / "c";
  ASSERT_EQ(run_cli("sample " + c.string()).status, 0);
  const CliRun r = run_cli("inspect " + c.string() + " --tp 2 --ep 2 --json");
  ASSERT_EQ(r.status, 0) << r.out;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  const nlohmann::json& s = j["shards"];
  const std::vector<int64_t> bytes = s["rank_bytes"].get<std::vector<int64_t>>();
  ASSERT_EQ(bytes.size(), 4u);
  const int64_t layer = s["layer_bytes"].get<int64_t>();
  for (const int64_t b : bytes) {
    EXPECT_EQ(b, bytes[0]);
    EXPECT_GT(4 * b, layer);
    EXPECT_LT(4 * b, layer + layer / 20);
  }
}

// --tp / --ep run every rank of the plan (threads on the CPU) and check each rank's summed output;
// a plan that cannot split the layer is a failed row naming the sizes that work.
TEST(Verify, RunsEveryRankOfATpEpPlan) {
  TempDir dir("verify_tp_ep");
  const std::filesystem::path c = dir.path() / "c";
  ASSERT_EQ(run_cli("sample " + c.string()).status, 0);
  const CliRun r = run_cli("verify " + c.string() + " --tp 2 --ep 2 --quiet");
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("tp 2 x ep 2 ranks"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("    1  tp2-ep2     cpu       f32"), std::string::npos) << r.out;
  const CliRun bad = run_cli("verify " + c.string() + " --tp 3 --quiet");
  EXPECT_EQ(bad.status, 1) << bad.out;
  EXPECT_NE(bad.out.find("I = 256 does not split evenly. TP sizes that work: 1, 2"),
            std::string::npos)
      << bad.out;
}

// On a terminal, a layer that takes seconds shows what it is at: the progress line is redrawn at
// each step within the layer (loading, reference, each backend), not only between layers. (The
// float64 reference of 512 tokens takes over a second, the line's threshold.)
TEST(Verify, ShowsProgressWithinALayerOnATerminal) {
  if (std::system("script --version >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "needs script(1) (util-linux) to run qmoe on a terminal";
  TempDir dir("verify_progress");
  const std::string c = dir / "c";
  ASSERT_EQ(run_cli("sample " + c + " --layers 1 --hidden 1024 --intermediate 512").status, 0);
  const std::string log = dir / "terminal.log";
  const std::string command = "script -qefc '" + std::string(QMOE_CLI) + " verify " + c +
                              " --tokens 512' " + log + " </dev/null >/dev/null 2>&1";
  ASSERT_EQ(std::system(command.c_str()), 0);
  std::ifstream in(log);
  std::stringstream text;
  text << in.rdbuf();
  const std::regex within_layer("\rverifying 0/1: layer 0: [^\r\n]+, [0-9.]+ m?s");
  EXPECT_TRUE(std::regex_search(text.str(), within_layer)) << text.str();
}

TEST(Verify, FailsOnLayersThatDoNotLoadOrAreMissing) {
  TempDir dir("verify_missing");
  const std::filesystem::path c = dir.path() / "c";
  ASSERT_EQ(run_cli("sample " + c.string()).status, 0);
  set_config(c, "num_hidden_layers", 3);
  CliRun r = run_cli("verify " + c.string());
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_NE(r.out.find("FAIL: declared in config.json, no experts in the files"), std::string::npos)
      << r.out;
  set_config(c, "num_experts", 9);
  r = run_cli("verify " + c.string());
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_NE(r.out.find("FAIL: does not load"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace qmoe::test

namespace qmoe::test {
namespace {

// Every row's floor, fraction of the floor and (for `backend`) speed-up over the baseline and
// error against it, recomputed from the row's own numbers and the run's ceilings. Returns how many
// rows of `backend` there were.
int check_floors_and_speedups(const nlohmann::json& j, const std::string& backend,
                              double max_error) {
  const double bytes_per_s = j["ceilings"]["read_bytes_per_s"].get<double>();
  const double flops_per_s = j["ceilings"]["flops_per_s"].get<double>();
  std::map<int64_t, double> baseline_s;
  for (const nlohmann::json& row : j["rows"])
    if (row["backend"] == j["baseline"]) baseline_s[row["m"].get<int64_t>()] = row["median_s"];
  int rows = 0;
  for (const nlohmann::json& row : j["rows"]) {
    EXPECT_FALSE(row.contains("error")) << row;
    if (row.contains("error")) continue;
    const double t = row["median_s"].get<double>(), floor = row["floor_s"].get<double>();
    EXPECT_GT(t, 0) << row;
    EXPECT_NEAR(floor,
                std::max(row["weight_bytes"].get<double>() / bytes_per_s,
                         row["flops"].get<double>() / flops_per_s),
                1e-9 * floor)
        << row;
    EXPECT_NEAR(row["fraction_of_floor"].get<double>(), floor / t, 1e-9) << row;
    if (row["backend"] != backend) continue;
    ++rows;
    const double speedup = baseline_s.at(row["m"].get<int64_t>()) / t;
    EXPECT_NEAR(row["speedup_over_baseline"].get<double>(), speedup, 1e-9 * speedup) << row;
    EXPECT_LT(row["error_vs_baseline"].get<double>(), max_error) << row;
  }
  return rows;
}

// `qmoe bench ARGS --json --plot F.svg` in a fresh directory: the parsed JSON (null when the run
// failed, which is reported) and the picture's text.
struct BenchRun {
  nlohmann::json json;
  std::string picture;
};

BenchRun run_bench_json(const std::string& args) {
  TempDir dir("bench");
  const std::string svg = dir / "b.svg";
  const CliRun r = run_cli("bench " + args + " --json --plot " + svg);
  EXPECT_EQ(r.status, 0) << r.out;
  if (r.status != 0) return {};
  std::ifstream in(svg);
  std::stringstream text;
  text << in.rdbuf();
  return {nlohmann::json::parse(r.out), text.str()};
}

// `bench` on a small random layer: a row per backend and M with positive times, the float
// baseline's rows when OpenBLAS is built in (each backend checked against it), and an SVG with one
// line per backend.
TEST(Bench, JsonRowsAndAPlotForEveryBackendAndM) {
  const BenchRun run =
      run_bench_json("--shape 256,128,8,2 --m 1,3 --seconds 0.01 --backend cpu,emulation");
  ASSERT_FALSE(run.json.is_null());
  const nlohmann::json& j = run.json;
  std::set<std::string> backends;
  for (const nlohmann::json& row : j["rows"]) {
    backends.insert(row["backend"].get<std::string>());
    EXPECT_TRUE(row["m"] == 1 || row["m"] == 3) << row;
    EXPECT_GT(row["median_s"].get<double>(), 0) << row;
    EXPECT_LE(row["p10_s"].get<double>(), row["p90_s"].get<double>()) << row;
    if (row.contains("error_vs_baseline")) {
      EXPECT_LT(row["error_vs_baseline"].get<double>(), 5e-3);
    }
  }
  const bool blas = backends.count("openblas-f32") == 1;
  EXPECT_EQ(j["rows"].size(), blas ? 6u : 4u) << j.dump(2);
  if (blas) {
    EXPECT_EQ(check_floors_and_speedups(j, "cpu", 5e-3), 2) << j.dump(2);
  }
  EXPECT_TRUE(backends.count("cpu") && backends.count("emulation")) << j.dump(2);
  const std::string& picture = run.picture;
  EXPECT_EQ(picture.rfind("<svg", 0), 0u) << picture.substr(0, 200);
  size_t lines = 0;
  for (size_t at = picture.find("<polyline"); at != std::string::npos;
       at = picture.find("<polyline", at + 1))
    ++lines;
  EXPECT_EQ(lines, backends.size());
}

// On a GPU: the ceilings measured in this run, the cuBLAS bf16 baseline's rows (moe_bench's), and
// for cuda-mma the fraction of the floor and the speed-up over the baseline, recomputed here from
// the row's own numbers, with its output checked against the baseline's.
TEST(Bench, OnAGpuReportsCeilingsAndSpeedUpOverCublasBf16) {
  if (cuda_devices().empty()) GTEST_SKIP() << "needs a CUDA GPU: cuda_devices() found none";
  const BenchRun run = run_bench_json(
      "--device cuda --shape 2048,768,32,8 --m 1,64 --seconds 0.05 --backend cuda-mma");
  ASSERT_FALSE(run.json.is_null());
  const nlohmann::json& j = run.json;
  // Any sm_80+ GPU copies faster than 100 GB/s and multiplies bf16 faster than 10 TFLOP/s.
  EXPECT_GT(j["ceilings"]["read_bytes_per_s"].get<double>(), 1e11) << j.dump(2);
  EXPECT_GT(j["ceilings"]["flops_per_s"].get<double>(), 1e13) << j.dump(2);
  ASSERT_EQ(j["baseline"], "cublas-bf16") << j.dump(2);
  EXPECT_EQ(j["rows"].size(), 4u) << j.dump(2);
  EXPECT_EQ(check_floors_and_speedups(j, "cuda-mma", 1.5e-2), 2) << j.dump(2);
  EXPECT_NE(run.picture.find("cublas-bf16"), std::string::npos);
}

// On the cpu (with OpenBLAS built in, which brings the ceilings): the read and copy ceilings on
// huge and on 4 KB pages, measured on the thread count --threads asked for; bf16 activations
// (--dtype) have no f32 baseline, and say so.
TEST(Bench, OnTheCpuReportsMemoryCeilingsOnTheThreadsAskedFor) {
  const BenchRun run = run_bench_json(
      "--device cpu --shape 256,128,8,2 --m 1 --seconds 0.01 --backend cpu --threads 1 "
      "--dtype bf16");
  ASSERT_FALSE(run.json.is_null());
  const nlohmann::json& c = run.json["ceilings"];
  if (c["read_bytes_per_s"] == 0) GTEST_SKIP() << "built without OpenBLAS: no cpu ceilings";
  for (const char* key : {"read_bytes_per_s", "copy_bytes_per_s", "read_4k_pages_bytes_per_s",
                          "copy_4k_pages_bytes_per_s"})
    EXPECT_GT(c[key].get<double>(), 1e8) << key << "\n" << c.dump(2);
  EXPECT_NE(c["how"].get<std::string>().find("on 1 thread;"), std::string::npos) << c.dump(2);
  EXPECT_TRUE(run.json["baseline"].is_null()) << run.json.dump(2);
  EXPECT_NE(run.json["why_no_baseline"].get<std::string>().find("bf16"), std::string::npos);
  ASSERT_EQ(run.json["rows"].size(), 1u) << run.json.dump(2);
  EXPECT_GT(run.json["rows"][0]["fraction_of_floor"].get<double>(), 0) << run.json.dump(2);
}

TEST(Bench, RunsACheckpointsFirstLayerAndRejectsBadShapes) {
  TempDir dir("bench_dir");
  ASSERT_EQ(run_cli("sample " + (dir / "c")).status, 0);
  const CliRun r = run_cli("bench " + (dir / "c") + " --m 2 --seconds 0.01");
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find((dir / "c") + " layer 0"), std::string::npos) << r.out;
  for (const char* shape : {"1,2", "256,128,8,0", "256,x,8,2"}) {
    const CliRun bad = run_cli(std::string("bench --shape ") + shape);
    EXPECT_EQ(bad.status, 2) << shape << "\n" << bad.out;
    EXPECT_NE(bad.out.find("expected H,I,E,TOPK"), std::string::npos) << bad.out;
  }
}

}  // namespace
}  // namespace qmoe::test
