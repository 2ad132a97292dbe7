#pragma once
// Typed reads of checkpoint tensors with the shape and dtype checks every adapter needs.
#include <cstdint>
#include <vector>

#include "format/packing.hpp"
#include "format/safetensors.hpp"

namespace qmoe::format {

// Throws Error "tensor 'x' must be I32[16, 8], got I32[8, 16] in model.safetensors" unless the
// dtype is one of `dtypes` and the shape matches.
void expect_tensor(const TensorInfo& t, const std::vector<StDType>& dtypes,
                   const std::vector<int64_t>& shape);

// Floating-point tensor (F16, BF16 or F32) of the given shape as float, exactly.
Matrix<float> read_floats(const TensorInfo& t, int64_t rows, int64_t cols);
std::vector<float> read_floats(const TensorInfo& t, int64_t count);
// Integer tensor (I32 or I64) of `count` elements as int64.
std::vector<int64_t> read_ints(const TensorInfo& t, int64_t count);

}  // namespace qmoe::format
