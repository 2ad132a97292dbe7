// The committed fixtures under tests/data load into exactly the canonical experts they were
// written from (fixture_spec.hpp), so a change in a reader that breaks real files on disk fails.
#include <gtest/gtest.h>

#include "data/fixture_spec.hpp"
#include "format_case.hpp"
#include "qmoe/checkpoint.hpp"

namespace qmoe {
namespace {

TEST(Fixtures, EveryFixtureLoadsBitExactly) {
  for (const auto& spec : fixtures::fixture_specs()) {
    SCOPED_TRACE(spec.dir);
    const Checkpoint ckpt = Checkpoint::open(std::filesystem::path(QMOE_TEST_DATA_DIR) / spec.dir);
    EXPECT_EQ(ckpt.format_kind(), spec.options.format);
    QuantScheme expected = spec.scheme;
    expected.source_scale_dtype =
        spec.scheme.kind == WeightKind::mxfp4 ? DType::u8 : spec.options.scale_dtype;
    EXPECT_EQ(ckpt.scheme(), expected) << to_string(ckpt.scheme());
    EXPECT_EQ(ckpt.naming(), spec.options.naming);
    ASSERT_EQ(static_cast<int>(ckpt.moe_layers().size()), spec.layers);
    for (int layer : ckpt.moe_layers()) {
      test::expect_identical(ckpt.load_layer(layer), fixtures::fixture_experts(spec, layer));
    }
  }
}

}  // namespace
}  // namespace qmoe
