#include "quant/mxfp4.hpp"

#include <algorithm>
#include <limits>

#include "core/check.hpp"

namespace qmoe {

int float_to_e2m1(double x) {
  const int sign = std::signbit(x) ? 8 : 0;
  const double a = std::fabs(x);
  int best = 0;
  double best_err = INFINITY;
  for (int c = 0; c < 8; ++c) {
    const double err = std::fabs(e2m1_to_float(c) - a);
    // Ties go to the even code (the one whose mantissa bit is 0).
    if (err < best_err || (err == best_err && (c & 1) == 0)) {
      best = c;
      best_err = err;
    }
  }
  return sign | best;
}

// The OCP Microscaling Formats (MX) v1.0 conversion (section 6.3), as microxcaling's
// `_quantize_mx` implements it with round="even":
//   shared = floor(log2(max |x|)) - 2          (2 = emax of e2m1: its largest value is 1.5 * 2^2)
//   shared clamped below at -127                (the smallest e8m0 scale)
//   element = e2m1 nearest to x / 2^shared, ties to even, saturating at +-6
// A block of zeros keeps its zeros (any scale gives 0). A block holding a NaN or an infinity, or
// whose scale would exceed 2^127 (only reachable from double), becomes NaN: its e8m0 scale is
// the NaN code 0xff, as in the specification and in microxcaling.
template <class T>
void mxfp4_quantize_dequantize(std::span<T> values) {
  check(values.size() % kMxBlock == 0,
        "MXFP4 activations are quantized in blocks of {} along K; {} values do not fill whole "
        "blocks",
        kMxBlock, values.size());
  for (size_t at = 0; at < values.size(); at += kMxBlock) {
    const std::span<T> block = values.subspan(at, kMxBlock);
    T amax = 0;
    for (T v : block) amax = std::isnan(v) ? v : std::max(amax, std::fabs(v));
    if (amax == 0) continue;
    int exponent = 0;  // amax = m * 2^exponent with m in [0.5, 1): floor(log2(amax)) = exponent - 1
    std::frexp(amax, &exponent);
    const int shared = std::max(exponent - 1 - 2, -127);
    if (!std::isfinite(amax) || shared > 127) {
      std::fill(block.begin(), block.end(), std::numeric_limits<T>::quiet_NaN());
      continue;
    }
    for (T& v : block)
      v = std::ldexp(static_cast<T>(e2m1_to_float(float_to_e2m1(std::ldexp(v, -shared)))), shared);
  }
}

template void mxfp4_quantize_dequantize<float>(std::span<float>);
template void mxfp4_quantize_dequantize<double>(std::span<double>);

}  // namespace qmoe
