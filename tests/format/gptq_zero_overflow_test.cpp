// The overflow rule of gptq_zero_overflow.hpp on hand-worked qzeros words. Fields are listed from
// field 0 (the least significant bits, the lowest output channel of the word) up.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "format/gptq_zero_overflow.hpp"
#include "support/expect_error.hpp"

namespace qmoe::format {
namespace {

std::vector<std::byte> bytes_of(const std::vector<uint32_t>& words) {
  std::vector<std::byte> b(words.size() * 4);
  std::memcpy(b.data(), words.data(), b.size());
  return b;
}

// (group, word, field, lost) of each overflow found in words [G, words / G].
std::vector<std::vector<int64_t>> overflows(const std::vector<uint32_t>& words, int64_t G,
                                            int bits) {
  std::vector<std::vector<int64_t>> out;
  const int64_t per_group = static_cast<int64_t>(words.size()) / G;
  for (const ZeroOverflow& o : find_zero_overflows(bytes_of(words), G, per_group, bits))
    out.push_back({o.group, o.word, o.field, o.lost});
  return out;
}

TEST(ZeroOverflowRule, TheLowestAllOnesFieldWithAllOnesAboveIsTheOverflow) {
  // 4 bits. True zeros [0, 13, 4, 10, 3, 4, 7, 15] as AutoGPTQ packs them: -1 everywhere.
  EXPECT_EQ(overflows({0xffffffff}, 1, 4), (std::vector<std::vector<int64_t>>{{0, 0, 0, 7}}));
  // Stored z - 1 [10, 0, 5, f, f, f, f, f]: a zero point of 0 in field 3, fields 4..7 lost.
  EXPECT_EQ(overflows({0xfffff50a}, 1, 4), (std::vector<std::vector<int64_t>>{{0, 0, 3, 4}}));
  // 8 bits, stored [5, ff, ff, ff]: field 1, fields 2 and 3 lost.
  EXPECT_EQ(overflows({0xffffff05}, 1, 8), (std::vector<std::vector<int64_t>>{{0, 0, 1, 2}}));
}

TEST(ZeroOverflowRule, NothingIsLostWithoutAFieldAboveOrWhenOneAboveIsIntact) {
  // A zero point of 0 in the top field: nothing above it to overwrite.
  EXPECT_TRUE(overflows({0xfd4bccdd}, 1, 4).empty());
  // All ones in field 3 but field 4 holds 4: a writer that masks z - 1 (qmoe's), nothing spilled.
  EXPECT_TRUE(overflows({0x1234f678}, 1, 4).empty());
  EXPECT_TRUE(overflows({0x01234567, 0x7fffffff}, 1, 4).empty());
}

TEST(ZeroOverflowRule, GroupsAndWordsAreCountedInOrder) {
  // [G = 2, 2 words]: group 0 word 1 and group 1 word 0 overflowed.
  EXPECT_EQ(overflows({0x12345678, 0xffffff00, 0xfffffff0, 0x76543210}, 2, 4),
            (std::vector<std::vector<int64_t>>{{0, 1, 2, 5}, {1, 0, 1, 6}}));
}

TEST(ZeroOverflowRule, StrictRefusalNamesTheTensorGroupAndChannels) {
  const std::vector<std::byte> b = bytes_of({0x12345678, 0x76543210, 0xfffff50a, 0xffffffff});
  test::expect_error([&] { refuse_zero_overflows(b, 2, 2, 4, "m.qzeros"); },
                     "m.qzeros: group 1, output channels 0..7: the zero point 0 of channel 3");
  test::expect_error([&] { refuse_zero_overflows(b, 2, 2, 4, "m.qzeros"); },
                     "channels 4..7 are lost (2 such word(s) in the tensor)");
  EXPECT_NO_THROW(refuse_zero_overflows(bytes_of({0x12345678, 0xfd4bccdd}), 1, 2, 4, "m.qzeros"));
}

}  // namespace
}  // namespace qmoe::format
