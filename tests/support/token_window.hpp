#pragma once
// Rows [first, first + count) of a host [M, C] buffer: as a view (an input), or copied (a truth
// to compare against). Lets many forwards of different M share one case and one reference.
#include <cstring>

#include "qmoe/tensor.hpp"

namespace qmoe::test {

inline TensorView rows_of(const Buffer& b, int64_t first, int64_t count) {
  const int64_t cols = b.dim(1);
  auto* base = static_cast<std::byte*>(b.view().data());
  return TensorView(base + first * cols * int64_t(size_of(b.dtype())), b.dtype(), {count, cols});
}

inline Buffer copy_rows(const Buffer& b, int64_t first, int64_t count) {
  Buffer out(b.dtype(), {count, b.dim(1)});
  if (count > 0) std::memcpy(out.data(), rows_of(b, first, count).data(), size_t(out.nbytes()));
  return out;
}

}  // namespace qmoe::test
