// Reading part of a stored tensor (tensor_part.hpp), the one way a loader reads tensor bytes: the
// rows and runs of columns asked for and nothing else, in place when they are one run of the file,
// and a part that does not fit the tensor is refused by name, whatever its numbers.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <limits>
#include <numeric>
#include <vector>

#include "format/safetensors.hpp"
#include "format/tensor_part.hpp"
#include "support/expect_error.hpp"

namespace qmoe::format {
namespace {

// I32 [4, 6] holding 0..23.
struct Stored {
  std::vector<int32_t> values = std::vector<int32_t>(24);
  TensorInfo t;
  Stored() {
    std::iota(values.begin(), values.end(), 0);
    t.name = "m.qweight";
    t.file = "model.safetensors";
    t.dtype = StDType::i32;
    t.shape = {4, 6};
    t.bytes = {reinterpret_cast<const std::byte*>(values.data()), values.size() * 4};
  }
};

std::vector<int32_t> read(const TensorInfo& t, const TensorPart& part) {
  std::vector<int32_t> out(static_cast<size_t>(part_bytes(t, part) / 4));
  read_part(t, part, std::as_writable_bytes(std::span(out)));
  return out;
}

TEST(TensorPart, ReadsTheColumnsOfEachRowAskedFor) {
  const Stored s;
  const TensorPart cols = block_part("m.qweight", {StDType::i32}, 4, 6, {1, 2}, {2, 3});
  EXPECT_EQ(part_bytes(s.t, cols), 6 * 4);
  EXPECT_EQ(read(s.t, cols), (std::vector<int32_t>{8, 9, 10, 14, 15, 16}));
  EXPECT_TRUE(contiguous_part(s.t, cols).empty());  // two runs: gathered
  // Rows in the order given, and whole rows in one range read in place.
  TensorPart rows = block_part("m.qweight", {StDType::i32}, 4, 6, {2, 2}, {0, 6});
  EXPECT_EQ(contiguous_part(s.t, rows).data(), s.t.bytes.data() + 2 * 6 * 4);
  EXPECT_EQ(contiguous_part(s.t, rows).size(), 2u * 6 * 4);
  rows.rows = {{3, 1}, {0, 1}};
  EXPECT_EQ(read(s.t, rows), (std::vector<int32_t>{18, 19, 20, 21, 22, 23, 0, 1, 2, 3, 4, 5}));
}

TEST(TensorPart, RefusesAPartThatDoesNotFitTheTensor) {
  const Stored s;
  const auto part = [](Range rows, Range cols) {
    return block_part("m.qweight", {StDType::i32}, 4, 6, rows, cols);
  };
  test::expect_error(
      [&] {
        part_bytes(s.t, part({3, 2}, {0, 6}));
      },
      "'m.qweight' (I32[4, 6] in model.safetensors): 2 rows from row 3 are outside its 4 rows");
  test::expect_error(
      [&] {
        part_bytes(s.t, part({0, 1}, {4, 3}));
      },
      "3 columns from column 4 are outside");
  test::expect_error([&] { part_bytes(s.t, part({-1, 1}, {0, 6})); }, "outside");
  constexpr int64_t kHuge = std::numeric_limits<int64_t>::max();
  test::expect_error([&] { part_bytes(s.t, part({2, kHuge}, {0, 6})); }, "outside");
  test::expect_error([&] { part_bytes(s.t, part({0, 1}, {kHuge, kHuge})); }, "outside");
  test::expect_error(
      [&] { part_bytes(s.t, block_part("m.qweight", {StDType::i32}, 6, 4, {}, {})); },
      "must be I32[6, 4], got I32[4, 6]");
  test::expect_error([&] { part_bytes(s.t, block_part("m.qweight", {StDType::u8}, 4, 6, {}, {})); },
                     "must be U8[4, 6]");
  std::vector<std::byte> small(4);
  test::expect_error([&] { read_part(s.t, part({0, 1}, {0, 2}), small); }, "8 bytes read into 4");
}

}  // namespace
}  // namespace qmoe::format
