// The compressed-tensors fixtures written by the library itself (tests/data/make_ct_fixture.py):
// qmoe reads its config.json and packed tensors, and every dequantized weight equals the
// library's own decompression of the same file (reference/dequantized.safetensors).
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "format/inspect.hpp"
#include "library_reference.hpp"
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
    ASSERT_NO_FATAL_FAILURE(test::expect_gated_layer(experts, kExperts, kHidden, kIntermediate));

    test::expect_layer_matches_library(experts, TensorStore::open(dir / "reference"));

    const CheckpointReport report = inspect(ckpt);
    EXPECT_TRUE(report.findings.empty()) << report.findings.front();
  }
}

}  // namespace
}  // namespace qmoe::format
