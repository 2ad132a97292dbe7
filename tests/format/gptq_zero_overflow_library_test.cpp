// The GPTQ v1 fixture whose qzeros AutoGPTQ 0.7.1's own packer overflowed
// (tests/data/gptq-library-int4-g32-asym-zero-overflow, make_awq_gptq_fixtures.py
// ZERO_OVERFLOW_WORDS): zero points of 0 in the lowest, a middle and the top field of some words,
// each written as all ones into its field and every field above it (gptq_zero_overflow.hpp).
// What is checked, against what:
//   - the true zero points (reference `<module>.zeros`, the packer's input) wherever the file still
//     holds them: every intact field, and the lowest all-ones field of a word, which can only have
//     been 0 (AutoGPTQ's qlinear_cuda reads it as 16: qmoe does not follow it there);
//   - the fields above it, whose true zero points are lost, as qmoe documents them: 0, the v1 rule
//     (field + 1) & mask, so every weight equals AutoGPTQ's qlinear_cuda_old decoding
//     (`<module>.weight_cuda_old`, its CPU path: add 1, then mask);
//   - `inspect` reports exactly the lost zero points (`<module>.zero_state` 2) per expert
//     projection and group, and strict_zeros refuses the layer.
// The same holds read as vLLM's moe_wna16 (which takes the GPTQ adapter's v1 reading).
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <tuple>
#include <vector>

#include "format/inspect.hpp"
#include "library_reference.hpp"
#include "qmoe/checkpoint.hpp"
#include "support/expect_error.hpp"

namespace qmoe::format {
namespace {

// reference `<module>.zero_state` [N, G] u8: 0 intact, or
constexpr uint8_t kOverflowed = 1;  // the zero point of 0 that set the fields above it
constexpr uint8_t kLost = 2;        // overwritten by it

const std::filesystem::path kDir =
    std::filesystem::path(QMOE_TEST_DATA_DIR) / "gptq-library-int4-g32-asym-zero-overflow";

struct Part {
  const char* name;
  bool down;
};
constexpr Part kParts[] = {{"gate_proj", false}, {"up_proj", false}, {"down_proj", true}};

std::string module(int64_t expert, const Part& part) {
  return "model.layers.0.mlp.experts." + std::to_string(expert) + "." + part.name;
}

// A u8 [N, G] reference tensor.
uint8_t at(const TensorInfo& t, int64_t n, int64_t g) {
  return static_cast<uint8_t>(t.bytes[static_cast<size_t>(n * t.shape.at(1) + g)]);
}

// The report's entries, as the reference's zero_state says they must be.
using Entry = std::tuple<int64_t, std::string, int64_t, int64_t, int64_t>;

std::vector<Entry> expected_overflows(const TensorStore& ref, int64_t experts) {
  constexpr int64_t pf = 8;  // int4: 8 output channels per qzeros word
  std::vector<Entry> out;
  for (int64_t e = 0; e < experts; ++e) {
    for (const Part& part : kParts) {
      const TensorInfo& state = ref.at(module(e, part) + ".zero_state");
      const int64_t N = state.shape.at(0), G = state.shape.at(1);
      for (int64_t g = 0; g < G; ++g) {
        int64_t words = 0, lost = 0;
        for (int64_t n0 = 0; n0 < N; n0 += pf) {
          int64_t in_word = 0;
          for (int64_t n = n0; n < n0 + pf; ++n) in_word += at(state, n, g) == kLost;
          words += in_word > 0;
          lost += in_word;
        }
        if (words > 0) out.emplace_back(e, part.name, g, words, lost);
      }
    }
  }
  return out;
}

class ZeroOverflowFixture : public testing::TestWithParam<bool> {
 protected:
  Checkpoint open(bool strict = false) const {
    return Checkpoint::open(kDir, {.as_moe_wna16 = GetParam(), .strict_zeros = strict});
  }
  const TensorStore ref_ = TensorStore::open(kDir / "reference");
};

TEST_P(ZeroOverflowFixture, ReadsTheTrueZeroPointsAndTheLostOnesAsZero) {
  const QuantizedExperts x = open().load_layer(0);
  const int64_t I = x.intermediate();
  int64_t overflowed = 0, lost = 0;
  for (int64_t e = 0; e < x.num_experts(); ++e) {
    for (const Part& part : kParts) {
      SCOPED_TRACE(module(e, part));
      const QuantizedWeight& w = part.down ? x.w2() : x.w13();
      const int64_t row0 = part.name == std::string("up_proj") ? I : 0;
      test::expect_matches_library(w, e, row0, ref_.at(module(e, part) + ".weight_cuda_old"));
      const TensorInfo& truth = ref_.at(module(e, part) + ".zeros");
      const TensorInfo& state = ref_.at(module(e, part) + ".zero_state");
      const int64_t N = truth.shape.at(0), G = w.groups();
      for (int64_t n = 0; n < N; ++n) {
        for (int64_t g = 0; g < G; ++g) {
          const int got = w.zeros.data_as<uint8_t>()[(e * w.N + row0 + n) * G + g];
          const int want = at(state, n, g) == kLost ? 0 : at(truth, n, g);
          EXPECT_EQ(got, want) << "channel " << n << " group " << g;
          overflowed += at(state, n, g) == kOverflowed;
          lost += at(state, n, g) == kLost;
        }
      }
    }
  }
  // ZERO_OVERFLOW_WORDS: 6 zero points of 0 (one in a top field, losing nothing), 27 lost.
  EXPECT_EQ(overflowed, 6);
  EXPECT_EQ(lost, 27);
}

TEST_P(ZeroOverflowFixture, InspectReportsTheLostZeroPoints) {
  const Checkpoint c = open();
  const CheckpointReport r = inspect(c);
  EXPECT_EQ(r.problems, 0) << "the layer runs; only strict_zeros refuses it";
  ASSERT_EQ(r.layers.size(), 1u);
  std::vector<Entry> got;
  for (const GroupZeroOverflow& o : r.layers[0].zero_overflows)
    got.emplace_back(o.expert, o.projection, o.group, o.words, o.lost_channels);
  EXPECT_EQ(got, expected_overflows(ref_, c.moe_config().num_experts));

  ASSERT_EQ(r.findings.size(), 1u);
  const std::string& finding = r.findings[0];
  EXPECT_NE(finding.find("layer 0: the zero points of 27 output channel(s) were overwritten"),
            std::string::npos)
      << finding;
  EXPECT_NE(finding.find("expert 0 gate_proj group 0 (7)"), std::string::npos) << finding;
  const nlohmann::ordered_json first = to_json(r)["layers"][0]["zero_overflows"][0];
  EXPECT_EQ(first.dump(),
            R"({"expert":0,"projection":"gate_proj","group":0,"words":1,"lost_channels":7})");
}

TEST_P(ZeroOverflowFixture, StrictZerosRefusesTheLayer) {
  const Checkpoint strict = open(true);
  // Experts load in parallel; the error of the lowest one is the one thrown.
  test::expect_error([&] { strict.load_layer(0); },
                     "model.layers.0.mlp.experts.0.gate_proj.qzeros: group 0, output channels "
                     "0..7: the zero point 0 of channel 0");
  const CheckpointReport r = inspect(strict);
  EXPECT_EQ(r.problems, 1);
  ASSERT_EQ(r.findings.size(), 1u);
  EXPECT_NE(r.findings[0].find("layer 0 does not load"), std::string::npos) << r.findings[0];
}

INSTANTIATE_TEST_SUITE_P(Upstream, ZeroOverflowFixture, testing::Bool(),
                         [](const testing::TestParamInfo<bool>& p) {
                           return p.param ? "as_moe_wna16" : "as_gptq";
                         });

// The other GPTQ v1 fixtures, packed by AutoGPTQ without a zero point of 0 and by qmoe's masked
// writer, load under strict_zeros: no word of theirs reads as overflowed.
TEST(ZeroOverflow, StrictZerosAcceptsTheOtherGptqV1Fixtures) {
  for (const char* dir : {"gptq-library-int4-g16-asym-desc_act",
                          "gptq-library-int8-channel-sym-bias", "gptq-int4-asym-desc_act-v1"}) {
    SCOPED_TRACE(dir);
    const Checkpoint c =
        Checkpoint::open(std::filesystem::path(QMOE_TEST_DATA_DIR) / dir, {.strict_zeros = true});
    for (int layer : c.moe_layers()) EXPECT_NO_THROW(c.load_layer(layer));
  }
}

}  // namespace
}  // namespace qmoe::format
