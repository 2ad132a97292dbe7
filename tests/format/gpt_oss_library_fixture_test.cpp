// The gpt-oss MXFP4 fixture decoded by the format's own code (tests/data/make_gpt_oss_fixture.py):
// every weight qmoe dequantizes equals gpt-oss's reference loader's float32 decoding of the same
// file (transformers' convert_moe_packed_tensors agrees with it), and so does every bias.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "format/safetensors.hpp"
#include "format/tensor_read.hpp"
#include "library_reference.hpp"
#include "qmoe/checkpoint.hpp"

namespace qmoe::format {
namespace {

constexpr int64_t kExperts = 3, kHidden = 96, kIntermediate = 32;
const std::string kPrefix = "model.layers.0.mlp.experts.";

// The canonical row of each stored row. The library decodes gate_up in its stored order, where
// gpt-oss's swiglu takes the even rows as the gate (x[..., ::2]) and the odd ones as up
// (x[..., 1::2]); qmoe's canonical w13 holds the I gate rows, then the I up rows.
std::vector<int64_t> canonical_rows(int64_t rows, bool interleaved) {
  std::vector<int64_t> canonical;
  for (int64_t r = 0; r < rows; ++r)
    canonical.push_back(!interleaved ? r : r % 2 == 0 ? r / 2 : rows / 2 + r / 2);
  return canonical;
}

void expect_weight_matches(const QuantizedWeight& w, const TensorStore& reference,
                           const std::string& proj, bool interleaved) {
  SCOPED_TRACE(proj);
  TensorInfo decoded = reference.at(kPrefix + proj);
  ASSERT_EQ(decoded.shape, (std::vector<int64_t>{w.E, w.N, w.K}));
  decoded.shape = {w.E * w.N, w.K};  // the experts' rows one after another
  const Matrix<float> expected = read_floats(decoded, w.E * w.N, w.K);
  const std::vector<int64_t> rows = canonical_rows(w.N, interleaved);
  for (int64_t e = 0; e < w.E; ++e) test::expect_rows_match_library(w, e, rows, expected, e * w.N);

  ASSERT_TRUE(w.has_bias());
  const Matrix<float> bias = read_floats(reference.at(kPrefix + proj + "_bias"), w.E, w.N);
  int64_t mismatches = 0;
  for (int64_t e = 0; e < w.E; ++e) {
    for (int64_t r = 0; r < w.N; ++r) {
      const float got = w.bias.data_as<float>()[e * w.N + rows[static_cast<size_t>(r)]];
      if (got != bias.at(e, r) && mismatches++ < 5)
        ADD_FAILURE() << "bias of expert " << e << " row " << r << ": qmoe " << got << ", library "
                      << bias.at(e, r);
    }
  }
  EXPECT_EQ(mismatches, 0);
}

TEST(GptOssLibraryFixture, DequantizesExactlyAsTheLibraryDoes) {
  const std::filesystem::path dir =
      std::filesystem::path(QMOE_TEST_DATA_DIR) / "gpt-oss-library-mxfp4-bias";
  const Checkpoint ckpt = Checkpoint::open(dir);
  EXPECT_EQ(ckpt.format_kind(), CheckpointFormat::mxfp4);
  EXPECT_EQ(ckpt.naming(), ExpertNaming::gpt_oss);
  EXPECT_EQ(
      ckpt.scheme(),
      (QuantScheme{
          .kind = WeightKind::mxfp4, .bits = 4, .group_size = 32, .source_scale_dtype = DType::u8}))
      << to_string(ckpt.scheme());
  ASSERT_EQ(ckpt.moe_layers(), std::vector<int>{0});

  const QuantizedExperts experts = ckpt.load_layer(0);
  ASSERT_NO_FATAL_FAILURE(test::expect_gated_layer(experts, kExperts, kHidden, kIntermediate));

  const TensorStore reference = TensorStore::open(dir / "reference");
  expect_weight_matches(experts.w13(), reference, "gate_up_proj", true);
  expect_weight_matches(experts.w2(), reference, "down_proj", false);
}

}  // namespace
}  // namespace qmoe::format
