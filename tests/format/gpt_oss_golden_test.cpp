// gpt-oss MXFP4 read from a directory written byte by byte here (layout in
// src/format/gpt_oss_mxfp4.cpp): one expert, H = I = 32 (one 32-value block per row).
#include <gtest/gtest.h>

#include <fstream>
#include <functional>
#include <vector>

#include "format/safetensors_writer.hpp"
#include "format_case.hpp"
#include "qmoe/checkpoint.hpp"
#include "support/expect_error.hpp"

namespace qmoe::format {
namespace {

constexpr int64_t H = 32, I = 32;

void write_config(const std::filesystem::path& dir) {
  std::ofstream(dir / "config.json") << R"({"model_type": "gpt_oss", "num_local_experts": 1,
    "num_experts_per_tok": 1, "hidden_size": 32, "intermediate_size": 32, "hidden_act": "silu",
    "swiglu_limit": 7.0, "quantization_config": {"quant_method": "mxfp4",
    "modules_to_not_convert": ["model.layers.*.mlp.router", "lm_head"]}})";
}

// Stored gate_up rows: row 0 (gate 0) = bytes 0xA2 with scale 127, row 1 (up 0) = 0x22 with
// scale 128, row 2 (gate 1) = 0x3F with scale 126; the rest 0 with scale 127. `edit_scales`, when
// given, changes the gate_up and down scales before they are written.
void write_tensors(
    const std::filesystem::path& dir,
    const std::function<void(std::vector<uint8_t>&, std::vector<uint8_t>&)>& edit_scales = {}) {
  std::vector<uint8_t> gate_up(2 * I * 16, 0), gate_up_scales(2 * I, 127);
  std::fill_n(gate_up.begin(), 16, uint8_t{0xA2});
  std::fill_n(gate_up.begin() + 16, 16, uint8_t{0x22});
  std::fill_n(gate_up.begin() + 32, 16, uint8_t{0x3F});
  gate_up_scales[1] = 128;
  gate_up_scales[2] = 126;
  std::vector<uint8_t> down(H * 16, 0x11), down_scales(H, 127);
  if (edit_scales) edit_scales(gate_up_scales, down_scales);
  SafetensorsWriter w;
  w.add<uint8_t>("model.layers.0.mlp.experts.gate_up_proj_blocks", StDType::u8, {1, 2 * I, 1, 16},
                 gate_up);
  w.add<uint8_t>("model.layers.0.mlp.experts.gate_up_proj_scales", StDType::u8, {1, 2 * I, 1},
                 gate_up_scales);
  w.add<uint8_t>("model.layers.0.mlp.experts.down_proj_blocks", StDType::u8, {1, H, 1, 16}, down);
  w.add<uint8_t>("model.layers.0.mlp.experts.down_proj_scales", StDType::u8, {1, H, 1},
                 down_scales);
  w.write(dir / "model.safetensors");
}

TEST(GoldenGptOss, NibblesScalesAndGateUpInterleave) {
  test::ScratchDir dir("gptoss");
  write_config(dir.path());
  write_tensors(dir.path());
  const Checkpoint ckpt = Checkpoint::open(dir.path());
  EXPECT_EQ(ckpt.format_kind(), CheckpointFormat::mxfp4);
  EXPECT_EQ(ckpt.naming(), ExpertNaming::gpt_oss);
  EXPECT_EQ(ckpt.moe_config().activation, Activation::swigluoai_uninterleave);
  EXPECT_TRUE(ckpt.moe_config().routing.renormalize);
  const QuantizedExperts x = ckpt.load_layer(0);
  const QuantizedWeight& w13 = x.w13();
  // 0xA2: low nibble 2 = +1.0 (even k), high nibble 0xA = -1.0 (odd k); e8m0 127 = 2^0.
  EXPECT_EQ(w13.dequant(0, 0, 0), 1.0f);
  EXPECT_EQ(w13.dequant(0, 0, 1), -1.0f);
  // Canonical row I (up 0) is stored row 1: 0x22 = +1.0, +1.0 times 2^(128 - 127).
  EXPECT_EQ(w13.dequant(0, I, 0), 2.0f);
  EXPECT_EQ(w13.dequant(0, I, 31), 2.0f);
  // Canonical row 1 (gate 1) is stored row 2: 0x3F = 6.0 (low 0xF = -6) ... low nibble F = -6.0,
  // high nibble 3 = +1.5, times 2^(126 - 127).
  EXPECT_EQ(w13.dequant(0, 1, 0), -3.0f);
  EXPECT_EQ(w13.dequant(0, 1, 1), 0.75f);
  // 0x11 = +0.5, +0.5 in every down row.
  EXPECT_EQ(x.w2().dequant(0, 5, 7), 0.5f);
}

// e8m0 0xff is NaN: refused at load, naming the checkpoint's tensor, its stored row and the block.
TEST(GoldenGptOss, NanScaleIsRefusedWithTheTensorRowAndBlock) {
  test::ScratchDir dir("gptoss");
  write_config(dir.path());
  write_tensors(dir.path(),
                [](std::vector<uint8_t>&, std::vector<uint8_t>& down) { down[5] = 0xff; });
  test::expect_error([&] { Checkpoint::open(dir.path()).load_layer(0); },
                     "model.layers.0.mlp.experts.down_proj_scales (U8[1, 32, 1] in "
                     "model.safetensors): expert 0, row 5, block 0 (k 0..31) is 0xff, the e8m0 NaN "
                     "(valid: 0x00..0xfe");
  write_tensors(dir.path(), [](std::vector<uint8_t>& gate_up, std::vector<uint8_t>&) {
    gate_up[6] = 0xff;  // stored row 6: gate channel 3
  });
  test::expect_error([&] { Checkpoint::open(dir.path()).load_layer(0); },
                     "gate_up_proj_scales (U8[1, 64, 1] in model.safetensors): expert 0, row 6 "
                     "(gate channel 3), block 0 (k 0..31) is 0xff");
}

TEST(GoldenGptOss, QuantizedRouterAndUnquantizedExpertsAreRefused) {
  test::ScratchDir dir("gptoss");
  write_config(dir.path());
  write_tensors(dir.path());
  SafetensorsWriter w;
  const std::vector<uint8_t> blocks(16, 0);
  w.add<uint8_t>("model.layers.0.mlp.router.weight_packed", StDType::u8, {16}, blocks);
  w.write(dir.path() / "router.safetensors");
  test::expect_error([&] { Checkpoint::open(dir.path()).load_layer(0); },
                     "the router 'model.layers.0.mlp.router' is stored quantized");

  test::ScratchDir plain("gptoss");
  write_config(plain.path());
  SafetensorsWriter f;
  const std::vector<uint16_t> weights(2 * I * H, 0);
  f.add<uint16_t>("model.layers.0.mlp.experts.gate_up_proj", StDType::bf16, {1, H, 2 * I}, weights);
  f.write(plain.path() / "model.safetensors");
  test::expect_error([&] { Checkpoint::open(plain.path()).load_layer(0); },
                     "the experts are stored unquantized");
}

}  // namespace
}  // namespace qmoe::format
