#include "format/packing.hpp"

#include <bit>
#include <cstring>

#include "core/check.hpp"

namespace qmoe::format {

namespace {

uint32_t word_at(std::span<const std::byte> words, int64_t i) {
  uint32_t w;
  std::memcpy(&w, words.data() + i * 4, 4);  // views into a mapped file need not be aligned
  return w;
}

uint8_t field(uint32_t word, int slot, int bits) {
  return static_cast<uint8_t>((word >> (slot * bits)) & ((1u << bits) - 1u));
}

uint32_t checked(uint8_t v, int bits) {
  check((v >> bits) == 0, "value {} does not fit in {} bits", v, bits);
  return v;
}

void check_words(std::span<const std::byte> words, int64_t count, int bits) {
  check(bits == 4 || bits == 8, "packed fields must be 4 or 8 bits, got {}", bits);
  check(static_cast<int64_t>(words.size()) == count * 4, "packed tensor has {} bytes, expected {}",
        words.size(), count * 4);
}

}  // namespace

Matrix<uint8_t> unpack_along_cols(std::span<const std::byte> words, int64_t rows, int64_t word_cols,
                                  int bits, SlotOrder slot_of) {
  check_words(words, rows * word_cols, bits);
  const int pf = pack_factor(bits);
  Matrix<uint8_t> m(rows, word_cols * pf);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t wc = 0; wc < word_cols; ++wc) {
      const uint32_t w = word_at(words, r * word_cols + wc);
      for (int i = 0; i < pf; ++i) m.at(r, wc * pf + i) = field(w, slot_of[i], bits);
    }
  }
  return m;
}

Matrix<uint8_t> unpack_along_rows(std::span<const std::byte> words, int64_t word_rows, int64_t cols,
                                  int bits) {
  check_words(words, word_rows * cols, bits);
  const int pf = pack_factor(bits);
  Matrix<uint8_t> m(word_rows * pf, cols);
  for (int64_t wr = 0; wr < word_rows; ++wr) {
    for (int64_t c = 0; c < cols; ++c) {
      const uint32_t w = word_at(words, wr * cols + c);
      for (int i = 0; i < pf; ++i) m.at(wr * pf + i, c) = field(w, i, bits);
    }
  }
  return m;
}

Matrix<uint8_t> unpack_along_cols_transposed(std::span<const std::byte> words, int64_t rows,
                                             int64_t word_cols, int bits, SlotOrder slot_of) {
  check_words(words, rows * word_cols, bits);
  const int pf = pack_factor(bits);
  Matrix<uint8_t> m(word_cols * pf, rows);
  uint8_t* out = m.values.data();
  for (int64_t wc = 0; wc < word_cols; ++wc) {
    for (int i = 0; i < pf; ++i) {
      uint8_t* row = out + (wc * pf + i) * rows;
      const int slot = slot_of[i];
      for (int64_t r = 0; r < rows; ++r)
        row[r] = field(word_at(words, r * word_cols + wc), slot, bits);
    }
  }
  return m;
}

Matrix<uint8_t> unpack_along_rows_transposed(std::span<const std::byte> words, int64_t word_rows,
                                             int64_t cols, int bits) {
  check_words(words, word_rows * cols, bits);
  const int pf = pack_factor(bits);
  Matrix<uint8_t> m(cols, word_rows * pf);
  uint8_t* out = m.values.data();
  for (int64_t c = 0; c < cols; ++c) {
    uint8_t* row = out + c * word_rows * pf;
    for (int64_t wr = 0; wr < word_rows; ++wr) {
      const uint32_t w = word_at(words, wr * cols + c);
      for (int i = 0; i < pf; ++i) row[wr * pf + i] = field(w, i, bits);
    }
  }
  return m;
}

void transpose_words(std::span<const std::byte> words, int64_t word_rows, int64_t cols,
                     uint8_t* out) {
  static_assert(std::endian::native == std::endian::little,
                "the canonical packing is the words' little-endian byte order");
  check_words(words, word_rows * cols, 8);
  // Tiles of 32 x 32 words keep both sides in the L1 cache.
  constexpr int64_t kTile = 32;
  const std::byte* src = words.data();
  for (int64_t r0 = 0; r0 < word_rows; r0 += kTile) {
    const int64_t r1 = std::min(word_rows, r0 + kTile);
    for (int64_t c0 = 0; c0 < cols; c0 += kTile) {
      const int64_t c1 = std::min(cols, c0 + kTile);
      for (int64_t c = c0; c < c1; ++c) {
        for (int64_t r = r0; r < r1; ++r)
          std::memcpy(out + (c * word_rows + r) * 4, src + (r * cols + c) * 4, 4);
      }
    }
  }
}

std::vector<uint32_t> pack_along_cols(const Matrix<uint8_t>& m, int bits, SlotOrder slot_of) {
  const int pf = pack_factor(bits);
  const int64_t word_cols = ceil_div(m.cols, pf);
  std::vector<uint32_t> words(static_cast<size_t>(m.rows * word_cols), 0);
  for (int64_t r = 0; r < m.rows; ++r) {
    for (int64_t c = 0; c < m.cols; ++c) {
      words[static_cast<size_t>(r * word_cols + c / pf)] |= checked(m.at(r, c), bits)
                                                            << (slot_of[c % pf] * bits);
    }
  }
  return words;
}

std::vector<uint32_t> pack_along_rows(const Matrix<uint8_t>& m, int bits) {
  const int pf = pack_factor(bits);
  std::vector<uint32_t> words(static_cast<size_t>(ceil_div(m.rows, pf) * m.cols), 0);
  for (int64_t r = 0; r < m.rows; ++r) {
    for (int64_t c = 0; c < m.cols; ++c) {
      words[static_cast<size_t>((r / pf) * m.cols + c)] |= checked(m.at(r, c), bits)
                                                           << ((r % pf) * bits);
    }
  }
  return words;
}

}  // namespace qmoe::format
