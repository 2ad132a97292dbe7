#pragma once
// Sub-word integer fields packed into 32-bit little-endian words, as every int4/int8 checkpoint
// format stores them. A word holds pf = 32 / bits fields; field f occupies bits [f*bits,
// f*bits+bits) counted from the least significant bit. `slot_of[i]` is the field that holds the
// i-th of the word's pf consecutive elements: the identity for GPTQ and compressed-tensors, the AWQ
// interleave for AWQ.
#include <algorithm>
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
  // Tiled so both sides stay in cache for the large (K x N) checkpoint matrices; sizes and
  // pointers in locals because byte stores may alias anything the compiler cannot see is local.
  Matrix transposed() const {
    constexpr int64_t kTile = 64;
    const int64_t R = rows, C = cols;
    Matrix t(C, R);
    const T* src = values.data();
    T* dst = t.values.data();
    for (int64_t r0 = 0; r0 < R; r0 += kTile) {
      const int64_t r1 = std::min(R, r0 + kTile);
      for (int64_t c0 = 0; c0 < C; c0 += kTile) {
        const int64_t c1 = std::min(C, c0 + kTile);
        for (int64_t r = r0; r < r1; ++r)
          for (int64_t c = c0; c < c1; ++c) dst[c * R + r] = src[r * C + c];
      }
    }
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

// The same unpacking with the result transposed, without a transpose pass over the big matrices:
// [rows, word_cols] words -> [word_cols * pf, rows]; [word_rows, cols] -> [cols, word_rows * pf].
Matrix<uint8_t> unpack_along_cols_transposed(std::span<const std::byte> words, int64_t rows,
                                             int64_t word_cols, int bits,
                                             SlotOrder slot_of = kIdentity8);
Matrix<uint8_t> unpack_along_rows_transposed(std::span<const std::byte> words, int64_t word_rows,
                                             int64_t cols, int bits);
// GPTQ's [word_rows, cols] words packed along the rows, identity slot order, hold exactly the
// canonical packing of [cols, word_rows * pf] (low bits = lower k): transposing the 32-bit words
// is the whole conversion. `out` receives cols rows of word_rows words (4 * word_rows bytes each).
void transpose_words(std::span<const std::byte> words, int64_t word_rows, int64_t cols,
                     uint8_t* out);

// Inverses. Missing trailing elements (cols or rows not a multiple of pf) pack as 0.
std::vector<uint32_t> pack_along_cols(const Matrix<uint8_t>& m, int bits,
                                      SlotOrder slot_of = kIdentity8);
std::vector<uint32_t> pack_along_rows(const Matrix<uint8_t>& m, int bits);

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace qmoe::format
