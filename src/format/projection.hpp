#pragma once
// One expert's linear projection with its codes unpacked: the unit every format adapter reads and
// writes, and the bridge to the canonical stacked QuantizedWeight.
#include <cstdint>
#include <string>
#include <vector>

#include "format/packing.hpp"
#include "format/tensor_part.hpp"
#include "qmoe/config.hpp"
#include "qmoe/quant.hpp"

namespace qmoe::format {

struct Projection {
  // [N, K], one unsigned code per byte; or, with codes_in_place, values left empty (rows and cols
  // still give N and K) because the reader wrote them straight into ProjectionSpec::codes_out.
  Matrix<uint8_t> codes;
  bool codes_in_place = false;
  Matrix<float> scales;        // [N, G]; 0 x 0 for mxfp4, whose scales are e8m0 below
  Matrix<uint8_t> e8m0;        // [N, K/32] for mxfp4: 2^(s - 127) per 32 values along K
  Matrix<uint8_t> zeros;       // [N, G]; 0 x 0 when the scheme is symmetric
  std::vector<int32_t> g_idx;  // [K]; empty without act-order
  std::vector<float> bias;     // [N]; empty without bias

  int64_t N() const { return codes.rows; }
  int64_t K() const { return codes.cols; }
};

// The canonical stacked weight [E, N, K] with zeroed parts (zeros, g_idx, bias as the scheme and
// `bias` say), to be filled expert by expert with put_projection. K_full > 0: the K slice of an
// act-order weight whose scales and zero points cover the whole K_full (QuantizedWeight::K_full).
QuantizedWeight allocate_stacked(int64_t E, int64_t N, int64_t K, const QuantScheme& scheme,
                                 bool bias, int64_t K_full = 0);

// The canonical w13 rows that hold intermediate channels `channels` of I, as ranges in canonical
// order: the channels' gate rows, then the same channels' up rows ([gate; up] halves), or pairs of
// rows (swigluoai's interleaved [g0, u0, g1, u1, ...]), or the rows themselves (not gated).
std::vector<Range> w13_row_ranges(Activation activation, int64_t I, Range channels);

// The canonical packed codes of rows [row0, ...) of expert e of `w`: ProjectionSpec::codes_out.
uint8_t* stacked_codes(QuantizedWeight& w, int64_t e, int64_t row0);

// Copies `p` into rows [row0, row0 + p.N()) of expert e of `w` (part `part` of the expert: gate
// then up for w13). Throws Error, naming `what` ("layer 3 w13"), when K, the groups, the bias or
// the act-order permutation disagree with `w`. Different experts may be put concurrently. The
// result is not validated here; QuantizedExperts does that.
void put_projection(QuantizedWeight& w, int64_t e, int64_t row0, int part, const Projection& p,
                    const std::string& what);

// Rows [row0, row0 + rows) of expert e of `w`, unpacked (bias and g_idx included when present).
Projection slice_projection(const QuantizedWeight& w, int64_t e, int64_t row0, int64_t rows);

}  // namespace qmoe::format
