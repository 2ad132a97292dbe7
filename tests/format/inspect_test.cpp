// `qmoe inspect`'s report: shapes and bytes per layer, and suspicious things found, not thrown.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <limits>

#include "format/inspect.hpp"
#include "format/model_config.hpp"
#include "format/safetensors.hpp"
#include "format_case.hpp"

namespace qmoe::format {
namespace {

MoEConfig small_config() {
  MoEConfig c;
  c.num_experts = 3;
  c.hidden = 64;
  c.intermediate = 32;
  return c;
}

TEST(Inspect, ReportsShapesBytesAndZeroScales) {
  QuantScheme s;
  s.group_size = 16;
  std::vector<QuantizedExperts> layers;
  QuantizedExperts x = test::random_experts(3, 64, 32, s, false, 9);
  QuantizedWeight w13 = x.w13().clone();
  w13.scales.data_as<float>()[5] = 0.0f;
  layers.emplace_back(std::move(w13), x.w2().clone());
  layers.push_back(std::move(x));
  test::ScratchDir dir("inspect");
  write_checkpoint(dir.path(), small_config(), layers, {});

  const CheckpointReport r = inspect(Checkpoint::open(dir.path()));
  EXPECT_EQ(r.format, "gptq");
  EXPECT_EQ(r.scheme, "int4 g16 sym");
  ASSERT_EQ(r.layers.size(), 2u);
  EXPECT_EQ(r.layers[0].w13.shape, (std::vector<int64_t>{3, 64, 64}));
  EXPECT_EQ(r.layers[0].w2.shape, (std::vector<int64_t>{3, 64, 32}));
  EXPECT_EQ(r.layers[0].w13.zero_scales, 1);
  EXPECT_EQ(r.layers[1].w13.zero_scales, 0);
  // int4 codes 64 x 64 / 2 + 64 x 32 / 2 bytes, plus qzeros, f16 scales and i32 g_idx, x 3 experts
  const int64_t codes = 3 * (2 * 32 * 64 / 2 + 64 * 32 / 2);
  EXPECT_GT(r.layers[0].bytes, codes);
  ASSERT_EQ(r.findings.size(), 1u);
  EXPECT_NE(r.findings[0].find("layer 0 w13: 1 zero scale(s)"), std::string::npos) << r.findings[0];
  EXPECT_EQ(to_json(r)["layers"][0]["w13"]["zero_scales"], 1);
}

TEST(Inspect, ALayerThatDoesNotLoadIsAFindingNotAnAbort) {
  QuantScheme s;
  s.group_size = 16;
  std::vector<QuantizedExperts> layers;
  layers.push_back(test::random_experts(3, 64, 32, s, false, 9));
  test::ScratchDir dir("inspect");
  write_checkpoint(dir.path(), small_config(), layers, {});
  ordered_json c;
  std::ifstream(dir.path() / "config.json") >> c;
  c["num_experts"] = 4;
  std::ofstream(dir.path() / "config.json") << c.dump();

  const CheckpointReport r = inspect(Checkpoint::open(dir.path()));
  ASSERT_EQ(r.layers.size(), 1u);
  EXPECT_NE(r.layers[0].error.find("experts.3.gate_proj' is missing"), std::string::npos)
      << r.layers[0].error;
  ASSERT_EQ(r.findings.size(), 1u);
  EXPECT_EQ(r.problems, 1);
  EXPECT_EQ(to_json(r)["layers"][0]["error"], r.layers[0].error);
}

// A non-finite scale on disk (the canonical form refuses to hold one) is named as a finding.
TEST(Inspect, NonFiniteScaleOnDiskIsAFinding) {
  QuantScheme s;
  s.group_size = 16;
  std::vector<QuantizedExperts> layers;
  layers.push_back(test::random_experts(3, 64, 32, s, false, 9));
  test::ScratchDir dir("inspect");
  write_checkpoint(dir.path(), small_config(), layers, {.scale_dtype = DType::f32});
  const std::filesystem::path file = dir.path() / "model.safetensors";
  std::vector<char> image(std::filesystem::file_size(file));
  std::ifstream(file, std::ios::binary)
      .read(image.data(), static_cast<std::streamsize>(image.size()));
  const auto bytes = std::as_bytes(std::span<const char>(image));
  for (const TensorInfo& t : parse_safetensors(bytes, "model.safetensors").tensors) {
    if (t.name == "model.layers.0.mlp.experts.1.down_proj.scales") {
      const float inf = std::numeric_limits<float>::infinity();
      std::memcpy(image.data() + (t.bytes.data() - bytes.data()) + 8, &inf, 4);
    }
  }
  std::ofstream(file, std::ios::binary)
      .write(image.data(), static_cast<std::streamsize>(image.size()));

  const CheckpointReport r = inspect(Checkpoint::open(dir.path()));
  ASSERT_EQ(r.findings.size(), 1u);
  EXPECT_NE(r.findings[0].find("layer 0 does not load: w2.scales: element"), std::string::npos)
      << r.findings[0];
  EXPECT_EQ(r.problems, 1);
  EXPECT_NE(r.findings[0].find("is inf"), std::string::npos) << r.findings[0];
}

}  // namespace
}  // namespace qmoe::format
