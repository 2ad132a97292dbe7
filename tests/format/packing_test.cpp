// GPTQ's direct code path: transpose_words against the definition (word (r, c) of the source is
// word (c, r) of the output, bytes in order), on random words at odd and blocked shapes, read
// from an unaligned address (mapped tensors need not be aligned), with guard bytes on both sides
// of the output that must keep their poison.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

#include "format/packing.hpp"

namespace qmoe::format {
namespace {

TEST(TransposeWords, MatchesTheDefinitionAtOddShapes) {
  std::mt19937 rng(24);
  constexpr int64_t kGuard = 64;
  constexpr uint8_t kPoison = 0x5a;
  for (const auto& [rows, cols] : std::vector<std::pair<int64_t, int64_t>>{{1, 1},
                                                                           {1, 7},
                                                                           {7, 1},
                                                                           {3, 5},
                                                                           {4, 4},
                                                                           {8, 8},
                                                                           {5, 130},
                                                                           {33, 65},
                                                                           {64, 96},
                                                                           {256, 1024},
                                                                           {129, 31}}) {
    std::vector<std::byte> storage(static_cast<size_t>(rows * cols * 4 + 1));
    for (std::byte& b : storage) b = static_cast<std::byte>(rng());
    const std::span<const std::byte> words(storage.data() + 1, storage.size() - 1);
    std::vector<uint8_t> out(static_cast<size_t>(rows * cols * 4 + 2 * kGuard), kPoison);
    transpose_words(words, rows, cols, out.data() + kGuard);
    int64_t wrong = 0;
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c)
        for (int64_t b = 0; b < 4; ++b)
          wrong += out[static_cast<size_t>(kGuard + (c * rows + r) * 4 + b)] !=
                   static_cast<uint8_t>(words[static_cast<size_t>((r * cols + c) * 4 + b)]);
    EXPECT_EQ(wrong, 0) << rows << " x " << cols;
    for (int64_t i = 0; i < kGuard; ++i) {
      EXPECT_EQ(out[static_cast<size_t>(i)], kPoison) << rows << " x " << cols << " before";
      EXPECT_EQ(out[out.size() - 1 - static_cast<size_t>(i)], kPoison)
          << rows << " x " << cols << " after";
    }
  }
}

}  // namespace
}  // namespace qmoe::format
