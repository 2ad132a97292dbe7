// Every rule of the safetensors reader: a broken file per rule, and the message it must produce.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "format/safetensors.hpp"
#include "format/safetensors_writer.hpp"
#include "format_case.hpp"
#include "support/expect_error.hpp"

namespace qmoe::format {
namespace {

using test::expect_error;

// A file image: 8-byte little-endian length of `header`, the header, then `data_bytes` bytes.
std::vector<std::byte> image(const std::string& header, size_t data_bytes,
                             uint64_t declared_length = UINT64_MAX) {
  const uint64_t length = declared_length == UINT64_MAX ? header.size() : declared_length;
  std::vector<std::byte> out(8 + header.size() + data_bytes, std::byte{0x5a});
  std::memcpy(out.data(), &length, 8);
  std::memcpy(out.data() + 8, header.data(), header.size());
  return out;
}

void expect_parse_error(const std::string& header, size_t data_bytes, const std::string& fragment) {
  const std::vector<std::byte> file = image(header, data_bytes);
  expect_error([&] { parse_safetensors(file, "t.safetensors"); }, fragment);
}

TEST(SafetensorsRules, ValidFileParsesWithZeroCopyViews) {
  const std::vector<std::byte> file = image(
      R"({"__metadata__":{"format":"pt"},"b":{"dtype":"F16","shape":[2],"data_offsets":[8,12]},)"
      R"("a":{"dtype":"I32","shape":[2,1],"data_offsets":[0,8]}})",
      12);
  const SafetensorsContents c = parse_safetensors(file, "t.safetensors");
  ASSERT_EQ(c.tensors.size(), 2u);
  EXPECT_EQ(c.metadata.at("format"), "pt");
  EXPECT_EQ(c.tensors[0].name, "a");  // data-offset order
  EXPECT_EQ(c.tensors[0].dtype, StDType::i32);
  EXPECT_EQ(c.tensors[0].shape, (std::vector<int64_t>{2, 1}));
  const std::byte* data = file.data() + file.size() - 12;
  EXPECT_EQ(c.tensors[0].bytes.data(), data);
  EXPECT_EQ(c.tensors[1].bytes.data(), data + 8);
  EXPECT_EQ(c.tensors[1].bytes.size(), 4u);
}

TEST(SafetensorsRules, EmptyHeaderObjectAndScalarAreValid) {
  EXPECT_TRUE(parse_safetensors(image("{}", 0), "t").tensors.empty());
  const auto c =
      parse_safetensors(image(R"({"s":{"dtype":"F64","shape":[],"data_offsets":[0,8]}})", 8), "t");
  EXPECT_EQ(c.tensors.at(0).numel(), 1);
}

TEST(SafetensorsRules, FileShorterThanTheLengthField) {
  const std::vector<std::byte> file(5);
  expect_error([&] { parse_safetensors(file, "t.safetensors"); },
               "t.safetensors: 5 bytes is too short");
}

TEST(SafetensorsRules, HeaderLengthAboveTheLimit) {
  const std::vector<std::byte> file = image("{}", 0, kMaxHeaderBytes + 1);
  expect_error([&] { parse_safetensors(file, "t.safetensors"); }, "exceeds the limit");
}

TEST(SafetensorsRules, HeaderLengthPastTheEndOfTheFile) {
  const std::vector<std::byte> file = image("{}", 0, 40);
  expect_error([&] { parse_safetensors(file, "t.safetensors"); },
               "header length 40 runs past the end of the file (2 bytes follow");
}

TEST(SafetensorsRules, HeaderMustBeValidJson) {
  expect_parse_error(R"({"a": {"dtype": "F32",)", 0, "header is not valid JSON");
}

TEST(SafetensorsRules, HeaderMustBeAnObject) {
  expect_parse_error("[1, 2]", 0, "header must be a JSON object");
}

TEST(SafetensorsRules, NestingDeeperThanTheFormatIsRefused) {
  expect_parse_error(R"({"a":{"dtype":"F32","shape":[[[1]]],"data_offsets":[0,4]}})", 4,
                     "nests deeper than the format allows");
}

TEST(SafetensorsRules, DuplicateTensorName) {
  expect_parse_error(R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},)"
                     R"("a":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}})",
                     2, "tensor 'a' appears twice");
}

TEST(SafetensorsRules, EntryMustBeAnObject) {
  expect_parse_error(R"({"a":[1]})", 0, "tensor 'a': entry must be an object");
}

TEST(SafetensorsRules, EmptyTensorName) {
  expect_parse_error(R"({"":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}})", 1,
                     "a tensor has an empty name");
}

TEST(SafetensorsRules, MissingField) {
  expect_parse_error(R"({"a":{"dtype":"U8","shape":[1]}})", 1,
                     "tensor 'a': missing field 'data_offsets'");
}

TEST(SafetensorsRules, UnknownDtype) {
  expect_parse_error(R"({"a":{"dtype":"Q4","shape":[1],"data_offsets":[0,1]}})", 1,
                     "tensor 'a': unknown dtype 'Q4' (known: BOOL, U8");
}

TEST(SafetensorsRules, NegativeOrFractionalDimension) {
  expect_parse_error(R"({"a":{"dtype":"U8","shape":[-1],"data_offsets":[0,0]}})", 0,
                     "tensor 'a': shape must hold non-negative integers");
  expect_parse_error(R"({"a":{"dtype":"U8","shape":[1.5],"data_offsets":[0,1]}})", 1,
                     "tensor 'a': shape must hold non-negative integers");
}

TEST(SafetensorsRules, ShapeProductOverflow) {
  expect_parse_error(R"({"a":{"dtype":"U8","shape":[4294967296,4294967296],"data_offsets":[0,0]}})",
                     0, "tensor 'a': shape [4294967296,4294967296] overflows 64 bits");
}

TEST(SafetensorsRules, ByteCountOverflow) {
  expect_parse_error(R"({"a":{"dtype":"F64","shape":[4611686018427387904],"data_offsets":[0,0]}})",
                     0, "times 8 bytes per element overflows 64 bits");
}

TEST(SafetensorsRules, DataOffsetsMustBeAPair) {
  expect_parse_error(R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0]}})", 1,
                     "tensor 'a': data_offsets must be [begin, end]");
}

TEST(SafetensorsRules, DataOffsetsEndBeforeBegin) {
  expect_parse_error(R"({"a":{"dtype":"U8","shape":[0],"data_offsets":[4,2]}})", 4,
                     "data_offsets [4, 2] end before they begin");
}

TEST(SafetensorsRules, SpanMustMatchShapeTimesElementSize) {
  expect_parse_error(R"({"a":{"dtype":"F32","shape":[2,3],"data_offsets":[0,20]}})", 20,
                     "tensor 'a': data_offsets span 20 bytes but shape [2,3] of F32 needs 24");
}

TEST(SafetensorsRules, SpanPastTheDataArea) {
  expect_parse_error(R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", 12,
                     "data_offsets [0, 16] run past the data area of 12 bytes");
}

TEST(SafetensorsRules, OverlappingTensors) {
  expect_parse_error(R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},)"
                     R"("b":{"dtype":"U8","shape":[4],"data_offsets":[2,6]}})",
                     6, "tensor 'b': bytes [2, 6) overlap tensor 'a' (ends at 4)");
}

TEST(SafetensorsRules, HoleInTheDataArea) {
  expect_parse_error(R"({"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},)"
                     R"("b":{"dtype":"U8","shape":[2],"data_offsets":[4,6]}})",
                     6, "tensor 'b': data area has a hole of 2 bytes at offset 2");
}

TEST(SafetensorsRules, TrailingBytesNotCoveredByAnyTensor) {
  expect_parse_error(R"({"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}})", 5,
                     "data area has 3 trailing bytes not covered by any tensor");
}

TEST(SafetensorsRules, MetadataMustBeAnObjectOfStrings) {
  expect_parse_error(R"({"__metadata__":[1]})", 0, "__metadata__ must be an object of strings");
  expect_parse_error(R"({"__metadata__":{"n":3}})", 0, "__metadata__ 'n' must be a string, got 3");
}

TEST(SafetensorsRules, WriterOutputParsesBack) {
  SafetensorsWriter w;
  const std::vector<int32_t> ints{1, -2, 3};
  const std::vector<uint16_t> halves{0x3c00, 0xc000};
  w.add<int32_t>("ints", StDType::i32, {3}, ints);
  w.add<uint16_t>("halves", StDType::f16, {1, 2}, halves);
  const std::vector<std::byte> file = w.serialize();
  uint64_t header = 0;
  std::memcpy(&header, file.data(), 8);
  EXPECT_EQ(header % 8, 0u) << "header padded so the data area starts 8-byte aligned";
  const SafetensorsContents c = parse_safetensors(file, "w");
  ASSERT_EQ(c.tensors.size(), 2u);
  EXPECT_EQ(c.tensors[0].name, "ints");
  EXPECT_EQ(std::memcmp(c.tensors[0].bytes.data(), ints.data(), 12), 0);
  EXPECT_EQ(c.tensors[1].shape, (std::vector<int64_t>{1, 2}));
}

// --- the model directory (sharded and not) ---

void write_file(const std::filesystem::path& p, const std::string& text) {
  std::ofstream(p) << text;
}

void write_tensor_file(const std::filesystem::path& p, const std::string& name) {
  SafetensorsWriter w;
  const std::vector<uint8_t> data{1, 2};
  w.add<uint8_t>(name, StDType::u8, {2}, data);
  w.write(p);
}

TEST(TensorStore, ShardedDirectoryFollowsTheIndex) {
  test::ScratchDir dir("store");
  write_tensor_file(dir.path() / "s1.safetensors", "a");
  write_tensor_file(dir.path() / "s2.safetensors", "b");
  write_file(dir.path() / "model.safetensors.index.json",
             R"({"metadata":{},"weight_map":{"a":"s1.safetensors","b":"s2.safetensors"}})");
  const TensorStore store = TensorStore::open(dir.path());
  EXPECT_EQ(store.at("a").file, "s1.safetensors");
  EXPECT_EQ(store.at("b").file, "s2.safetensors");
  expect_error([&] { store.at("c"); }, "checkpoint has no tensor 'c'");
}

TEST(TensorStore, IndexMayNotPointOutsideTheDirectory) {
  test::ScratchDir dir("store");
  write_file(dir.path() / "model.safetensors.index.json",
             R"({"weight_map":{"a":"../elsewhere.safetensors"}})");
  expect_error([&] { TensorStore::open(dir.path()); },
               "shards must be plain file names in the model directory");
}

TEST(TensorStore, IndexMustAgreeWithTheShards) {
  test::ScratchDir dir("store");
  write_tensor_file(dir.path() / "s1.safetensors", "a");
  write_file(dir.path() / "model.safetensors.index.json",
             R"({"weight_map":{"a":"s1.safetensors","z":"s1.safetensors"}})");
  expect_error([&] { TensorStore::open(dir.path()); },
               "weight_map puts tensor 'z' in s1.safetensors, but no shard holds it");
}

TEST(TensorStore, TensorStoredTwice) {
  test::ScratchDir dir("store");
  write_tensor_file(dir.path() / "s1.safetensors", "a");
  write_tensor_file(dir.path() / "s2.safetensors", "a");
  expect_error([&] { TensorStore::open(dir.path()); },
               "tensor 'a' is stored twice, in s1.safetensors and s2.safetensors");
}

TEST(TensorStore, DirectoryWithoutTensors) {
  test::ScratchDir dir("store");
  expect_error([&] { TensorStore::open(dir.path()); }, "no model.safetensors.index.json and no");
}

TEST(TensorStore, BrokenShardNamesTheFile) {
  test::ScratchDir dir("store");
  write_file(dir.path() / "model.safetensors", "abc");
  expect_error([&] { TensorStore::open(dir.path()); }, "model.safetensors: 3 bytes is too short");
}

}  // namespace
}  // namespace qmoe::format
