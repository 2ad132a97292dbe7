#include "format/tensor_part.hpp"

#include <cstring>

#include "core/check.hpp"
#include "format/tensor_read.hpp"

namespace qmoe::format {

int64_t TensorPart::rows_read() const {
  int64_t n = 0;
  for (const Range& r : rows) n += r.count;
  return n;
}

TensorPart block_part(std::string name, std::vector<StDType> dtypes, int64_t R, int64_t C,
                      Range rows, Range cols) {
  return TensorPart{std::move(name),         std::move(dtypes), {R, C}, C, {rows}, cols,
                    {rows.count, cols.count}};
}

TensorPart span_part(std::string name, std::vector<StDType> dtypes, int64_t L, Range range) {
  return TensorPart{std::move(name), std::move(dtypes), {L}, L, {{0, 1}}, range, {range.count}};
}

TensorPart whole_part(std::string name, std::vector<StDType> dtypes, std::vector<int64_t> shape) {
  int64_t numel = 1;
  for (int64_t d : shape) numel *= d;
  std::vector<int64_t> part_shape = shape;
  return TensorPart{std::move(name), std::move(dtypes), std::move(shape),     numel,
                    {{0, 1}},        {0, numel},        std::move(part_shape)};
}

namespace {

bool within(Range r, int64_t size) {
  return r.first >= 0 && r.count >= 0 && r.first <= size && r.count <= size - r.first;
}

// Checks `part` against `t` and returns its bytes. Ranges are checked before anything is
// multiplied, so a hostile part cannot overflow into an address inside the file.
int64_t checked_bytes(const TensorInfo& t, const TensorPart& part) {
  expect_tensor(t, part.dtypes, part.shape);
  const int64_t numel = t.numel();
  check(part.cols >= 1 && numel % part.cols == 0,
        "tensor '{}' ({}): a part of it viewed with {} columns (valid: a divisor of {})", t.name,
        t.describe(), part.cols, numel);
  const int64_t rows = numel / part.cols;
  check(within(part.col_range, part.cols),
        "tensor '{}' ({}): {} columns from column {} are outside its {} columns", t.name,
        t.describe(), part.col_range.count, part.col_range.first, part.cols);
  int64_t rows_read = 0;
  for (const Range& r : part.rows) {
    // Messages name first and count: first + count may overflow for a hostile part.
    check(within(r, rows), "tensor '{}' ({}): {} rows from row {} are outside its {} rows", t.name,
          t.describe(), r.count, r.first, rows);
    check(!__builtin_add_overflow(rows_read, r.count, &rows_read),
          "tensor '{}': a part of too many rows", t.name);
  }
  int64_t elements = 0, shape_elements = 1;
  check(!__builtin_mul_overflow(rows_read, part.col_range.count, &elements),
        "tensor '{}': a part of too many elements", t.name);
  for (int64_t d : part.part_shape)
    check(d >= 0 && !__builtin_mul_overflow(shape_elements, d, &shape_elements),
          "tensor '{}': a part shaped with a bad dimension {}", t.name, d);
  check(shape_elements == elements, "tensor '{}': a part of {} elements is not shaped as {}",
        t.name, elements, shape_elements);
  return elements * size_of(t.dtype);  // <= ranges x the tensor's bytes, which fit
}

}  // namespace

int64_t part_bytes(const TensorInfo& t, const TensorPart& part) { return checked_bytes(t, part); }

void read_part(const TensorInfo& t, const TensorPart& part, std::span<std::byte> out) {
  const int64_t bytes = checked_bytes(t, part);
  check(static_cast<int64_t>(out.size()) == bytes,
        "tensor '{}': a part of {} bytes read into {} bytes", t.name, bytes, out.size());
  const int64_t elem = size_of(t.dtype);
  const int64_t run = part.col_range.count * elem, row_bytes = part.cols * elem;
  if (run == 0) return;  // an empty tensor's bytes (and `out`) may be null: memcpy's UB
  std::byte* to = out.data();
  for (const Range& r : part.rows) {
    for (int64_t row = r.first; row < r.end(); ++row) {
      std::memcpy(to, t.bytes.data() + row * row_bytes + part.col_range.first * elem,
                  static_cast<size_t>(run));
      to += run;
    }
  }
}

std::span<const std::byte> contiguous_part(const TensorInfo& t, const TensorPart& part) {
  const int64_t bytes = checked_bytes(t, part);
  const int64_t elem = size_of(t.dtype);
  // Whole rows in adjacent ranges, or columns of a single row.
  const bool whole_rows = part.col_range.count == part.cols;
  bool adjacent = !part.rows.empty();
  for (size_t i = 1; i < part.rows.size(); ++i)
    adjacent = adjacent && part.rows[i].first == part.rows[i - 1].end();
  if (bytes == 0 || !((whole_rows && adjacent) || part.rows_read() == 1)) return {};
  int64_t first_row = part.rows.front().first;
  for (const Range& r : part.rows) {
    if (r.count > 0) {
      first_row = r.first;
      break;
    }
  }
  return t.bytes.subspan(static_cast<size_t>((first_row * part.cols + part.col_range.first) * elem),
                         static_cast<size_t>(bytes));
}

}  // namespace qmoe::format
