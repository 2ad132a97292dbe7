// The compressed-tensors fixtures written by the library itself (tests/data/make_ct_fixture.py):
// qmoe reads its config.json and packed tensors, and every dequantized weight equals the
// library's own decompression of the same file (reference/dequantized.safetensors).
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "format/inspect.hpp"
#include "format/safetensors.hpp"
#include "format/tensor_read.hpp"
#include "qmoe/checkpoint.hpp"

namespace qmoe::format {
namespace {

struct LibraryFixture {
  std::string dir;
  ZeroPoint zero_point;
  DType scale_dtype;
};

const LibraryFixture kFixtures[] = {
    {"ct-library-int4-g32-sym", ZeroPoint::none, DType::bf16},
    {"ct-library-int4-g32-asym", ZeroPoint::explicit_, DType::f16},
};

constexpr int64_t kExperts = 4, kHidden = 64, kIntermediate = 32;

// Compares rows [row0, row0 + N) of `w` for expert e with the library's [N, K] float32 weight.
// Exact equality: the library widened the 16-bit scales to float32 before (q - z) * s, and that
// product of a 4-bit integer and a 16-bit float is exact in float32, as it is in dequant().
void expect_matches_library(const QuantizedWeight& w, int64_t e, int64_t row0,
                            const TensorInfo& reference) {
  SCOPED_TRACE(reference.name);
  const int64_t N = reference.shape.at(0), K = reference.shape.at(1);
  ASSERT_EQ(K, w.K);
  const Matrix<float> expected = read_floats(reference, N, K);
  int64_t mismatches = 0, nonzero = 0;
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t k = 0; k < K; ++k) {
      const float want = expected.at(n, k);
      const float got = w.dequant(e, row0 + n, k);
      nonzero += want != 0.0f;
      if (got != want && mismatches++ < 5) {
        ADD_FAILURE() << "(" << n << ", " << k << "): qmoe " << got << ", library " << want;
      }
    }
  }
  EXPECT_EQ(mismatches, 0);
  EXPECT_GT(nonzero, N * K / 2) << "the reference should be random weights, not mostly zeros";
}

TEST(CtLibraryFixtures, DequantizeExactlyAsTheLibraryDoes) {
  for (const LibraryFixture& f : kFixtures) {
    SCOPED_TRACE(f.dir);
    const std::filesystem::path dir = std::filesystem::path(QMOE_TEST_DATA_DIR) / f.dir;
    const Checkpoint ckpt = Checkpoint::open(dir);
    EXPECT_EQ(ckpt.format_kind(), CheckpointFormat::compressed_tensors);
    EXPECT_EQ(ckpt.naming(), ExpertNaming::qwen);
    QuantScheme expected_scheme;
    expected_scheme.bits = 4;
    expected_scheme.group_size = 32;
    expected_scheme.zero_point = f.zero_point;
    expected_scheme.source_scale_dtype = f.scale_dtype;
    EXPECT_EQ(ckpt.scheme(), expected_scheme) << to_string(ckpt.scheme());
    ASSERT_EQ(ckpt.moe_layers(), std::vector<int>{0});

    const QuantizedExperts experts = ckpt.load_layer(0);
    ASSERT_EQ(experts.num_experts(), kExperts);
    ASSERT_EQ(experts.hidden(), kHidden);
    ASSERT_EQ(experts.intermediate(), kIntermediate);
    ASSERT_TRUE(experts.gated());

    const TensorStore reference = TensorStore::open(dir / "reference");
    for (int64_t e = 0; e < kExperts; ++e) {
      const std::string prefix = "model.layers.0.mlp.experts." + std::to_string(e) + ".";
      expect_matches_library(experts.w13(), e, 0, reference.at(prefix + "gate_proj.weight"));
      expect_matches_library(experts.w13(), e, kIntermediate,
                             reference.at(prefix + "up_proj.weight"));
      expect_matches_library(experts.w2(), e, 0, reference.at(prefix + "down_proj.weight"));
    }

    const CheckpointReport report = inspect(ckpt);
    EXPECT_TRUE(report.findings.empty()) << report.findings.front();
  }
}

}  // namespace
}  // namespace qmoe::format
