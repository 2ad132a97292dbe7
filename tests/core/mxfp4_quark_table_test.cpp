// The even activation scale rule (ActivationQuant::mxfp4_even) against amd-quark's own outputs:
// tests/data/quark-mxfp4-even-blocks.txt holds float32 blocks and what Quark's W4A4 input
// quantizer (OCP_MXFP4Spec, scale_calculation_mode even) made of them, written by
// tests/data/make_quark_mx_table.py. Every value must come out the same; zeros are compared by
// value, since Quark's rounding drops the sign of a negative value that rounds to zero.
#include <gtest/gtest.h>

#include <bit>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "quant/mxfp4.hpp"

namespace qmoe {
namespace {

struct QuarkBlock {
  int line = 0;
  std::vector<float> input, quark;
};

std::vector<QuarkBlock> read_table(const std::filesystem::path& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in) << "cannot open " << path;
  std::vector<QuarkBlock> blocks;
  std::string text;
  for (int line = 1; std::getline(in, text); ++line) {
    if (text.empty() || text[0] == '#') continue;
    QuarkBlock b;
    b.line = line;
    std::istringstream words(text);
    for (std::string word; words >> word;) {
      uint32_t bits = 0;
      const auto [end, ec] = std::from_chars(word.data(), word.data() + word.size(), bits, 16);
      EXPECT_TRUE(ec == std::errc{} && end == word.data() + word.size())
          << path << ":" << line << ": '" << word << "' is not a hex float32";
      (b.input.size() < kMxBlock ? b.input : b.quark).push_back(std::bit_cast<float>(bits));
    }
    EXPECT_EQ(b.quark.size(), size_t(kMxBlock)) << path << ":" << line << ": needs 64 values";
    blocks.push_back(std::move(b));
  }
  return blocks;
}

TEST(Mxfp4EvenActivations, ReproduceQuarksOwnOutputs) {
  const std::vector<QuarkBlock> blocks =
      read_table(std::filesystem::path(QMOE_TEST_DATA_DIR) / "quark-mxfp4-even-blocks.txt");
  ASSERT_GE(blocks.size(), 100u);
  int nan_blocks = 0;
  for (const QuarkBlock& b : blocks) {
    std::vector<float> q = b.input;
    mxfp4_quantize_dequantize(std::span<float>(q), ActivationQuant::mxfp4_even);
    nan_blocks += std::isnan(b.quark[0]);
    for (int i = 0; i < kMxBlock; ++i) {
      const bool same = std::isnan(b.quark[i]) ? std::isnan(q[i]) : q[i] == b.quark[i];
      EXPECT_TRUE(same) << "line " << b.line << ", element " << i << ": input " << b.input[i]
                        << ", Quark " << b.quark[i] << ", qmoe " << q[i];
    }
  }
  EXPECT_EQ(nan_blocks, 1);  // the table's one NaN block
}

}  // namespace
}  // namespace qmoe
