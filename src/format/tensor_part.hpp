#pragma once
// Reading part of a stored tensor. A tensor-parallel rank needs only some rows or columns of each
// packed tensor of a layer, so the readers say which part of each tensor they decode and read
// only those bytes. A tensor is viewed as a row-major matrix [rows, cols] (its leading dims folded
// into rows); a part is some of its rows, as ranges in the order wanted, and of each row the same
// range of columns. Each row's columns are one contiguous run of bytes in the file; whole rows in
// one range are a single run, read in place.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "format/safetensors.hpp"

namespace qmoe::format {

struct Range {
  int64_t first = 0, count = 0;
  int64_t end() const { return first + count; }
};

struct TensorPart {
  std::string name;
  std::vector<StDType> dtypes;  // the stored dtypes the reader accepts
  std::vector<int64_t> shape;   // the stored shape the reader expects
  int64_t cols = 1;             // elements per row of the matrix view
  std::vector<Range> rows;      // of the matrix view, in the order they are read
  Range col_range;
  std::vector<int64_t> part_shape;  // what the part is to its reader

  int64_t rows_read() const;
};

// Rows `rows` x columns `cols` of a 2-D tensor [R, C].
TensorPart block_part(std::string name, std::vector<StDType> dtypes, int64_t R, int64_t C,
                      Range rows, Range cols);
// Elements `range` of a 1-D tensor [L].
TensorPart span_part(std::string name, std::vector<StDType> dtypes, int64_t L, Range range);
// All of a tensor of this shape.
TensorPart whole_part(std::string name, std::vector<StDType> dtypes, std::vector<int64_t> shape);

// Bytes of `part` of `t`. Throws Error naming the tensor when t is not the dtype and shape the part
// expects, or the part reaches outside it (the tensor itself lies inside its file: the parser
// checked that).
int64_t part_bytes(const TensorInfo& t, const TensorPart& part);
// Copies `part` of `t` into `out` (part_bytes of it), checked as part_bytes is.
void read_part(const TensorInfo& t, const TensorPart& part, std::span<std::byte> out);
// The part's bytes in place when they are one contiguous run of `t`, else an empty span.
std::span<const std::byte> contiguous_part(const TensorInfo& t, const TensorPart& part);

}  // namespace qmoe::format
