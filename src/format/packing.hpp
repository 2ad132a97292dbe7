#pragma once
// Sub-word integer fields packed into 32-bit little-endian words, as every int4/int8 checkpoint
// format stores them. A word holds pf = 32 / bits fields; field f occupies bits [f*bits,
// f*bits+bits) counted from the least significant bit. `slot_of[i]` is the field that holds the
// i-th of the word's pf consecutive elements: the identity for GPTQ and compressed-tensors, the AWQ
// interleave for AWQ.
#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace qmoe::format {

// A dense row-major matrix of small values (codes or zero points, one per byte) or floats.
template <class T>
struct Matrix {
  int64_t rows = 0, cols = 0;
  std::vector<T> values;

  Matrix() = default;
  Matrix(int64_t r, int64_t c) : rows(r), cols(c), values(static_cast<size_t>(r * c)) {}
  T& at(int64_t r, int64_t c) { return values[static_cast<size_t>(r * cols + c)]; }
  const T& at(int64_t r, int64_t c) const { return values[static_cast<size_t>(r * cols + c)]; }
  Matrix transposed() const {
    Matrix t(cols, rows);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) t.at(c, r) = at(r, c);
    return t;
  }
};

inline int pack_factor(int bits) { return 32 / bits; }

using SlotOrder = std::span<const int>;
inline constexpr std::array<int, 8> kIdentity8{0, 1, 2, 3, 4, 5, 6, 7};
// AWQ (AutoAWQ awq/utils/packing_utils.py AWQ_REVERSE_ORDER): element i of a group of 8 output
// columns sits in field kAwqSlotOf[i]; read the other way, fields 0..7 hold 0, 2, 4, 6, 1, 3, 5, 7.
inline constexpr std::array<int, 8> kAwqSlotOf{0, 4, 1, 5, 2, 6, 3, 7};

// words: [rows, word_cols] -> [rows, word_cols * pf]; elements run along the columns.
Matrix<uint8_t> unpack_along_cols(std::span<const std::byte> words, int64_t rows, int64_t word_cols,
                                  int bits, SlotOrder slot_of = kIdentity8);
// words: [word_rows, cols] -> [word_rows * pf, cols]; elements run down the rows.
Matrix<uint8_t> unpack_along_rows(std::span<const std::byte> words, int64_t word_rows, int64_t cols,
                                  int bits);

// Inverses. Missing trailing elements (cols or rows not a multiple of pf) pack as 0.
std::vector<uint32_t> pack_along_cols(const Matrix<uint8_t>& m, int bits,
                                      SlotOrder slot_of = kIdentity8);
std::vector<uint32_t> pack_along_rows(const Matrix<uint8_t>& m, int bits);

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace qmoe::format
