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

namespace {

// The exponent of a block's shared scale for a block maximum 0 < amax < infinity, by `rule`:
//   mxfp4 (the OCP Microscaling Formats (MX) v1.0 conversion, section 6.3, as microxcaling's
//   `_quantize_mx` implements it):  floor(log2(amax)) - 2
//     (2 = emax of e2m1: its largest value is 1.5 * 2^2)
//   mxfp4_even (amd-quark 0.13's default "even", quark/torch/quantization/utils.py even_round):
//     the same of amax rounded to a power of two first, up when its significand is 1.75 or more
//     (Quark adds 2^21 to the float32 bits, below e2m1's one mantissa bit, and keeps the exponent)
// both clamped below at -127 (the smallest e8m0 scale; Quark's "floor" lacks this clamp, so it
// differs on blocks whose maximum is below 2^-125). Above, the floor rule has no clamp: an
// exponent over 127 (only reachable from double) makes the block NaN. Quark clamps the even rule
// at 127, and its float32 rounding turns amax >= 1.75 * 2^127 into infinity, so those take 127.
int shared_exponent(double amax, ActivationQuant rule) {
  int exponent = 0;  // amax = m * 2^exponent with m in [0.5, 1): floor(log2(amax)) = exponent - 1
  const double m = std::frexp(amax, &exponent);
  if (rule == ActivationQuant::mxfp4) return std::max(exponent - 1 - 2, -127);
  const int rounded = m >= 0.875 ? exponent : exponent - 1;  // 0.875 * 2 = 1.75
  return rounded >= 128 ? 127 : std::max(rounded - 2, -127);
}

}  // namespace

// Each element becomes the e2m1 value nearest to x / 2^shared, ties to even, saturating at +-6
// (Quark's round_method half_even). A block of zeros keeps its zeros (any scale gives 0). A block
// holding a NaN or an infinity, or whose scale would exceed 2^127, becomes NaN: its e8m0 scale is
// the NaN code 0xff, as in the specification and in microxcaling. (Quark's even path keeps an
// infinity and rounds the rest of its block at scale 2^127; qmoe does not let it pass as a number.)
template <class T>
void mxfp4_quantize_dequantize(std::span<T> values, ActivationQuant rule) {
  check(values.size() % kMxBlock == 0,
        "MXFP4 activations are quantized in blocks of {} along K; {} values do not fill whole "
        "blocks",
        kMxBlock, values.size());
  check(rule == ActivationQuant::mxfp4 || rule == ActivationQuant::mxfp4_even,
        "MXFP4 activations: ActivationQuant {} is not a scale rule (valid: mxfp4, mxfp4_even)",
        static_cast<int>(rule));
  for (size_t at = 0; at < values.size(); at += kMxBlock) {
    const std::span<T> block = values.subspan(at, kMxBlock);
    T amax = 0;
    for (T v : block) amax = std::isnan(v) ? v : std::max(amax, std::fabs(v));
    if (amax == 0) continue;
    const int shared = std::isfinite(amax) ? shared_exponent(double(amax), rule) : 128;
    if (shared > 127) {
      std::fill(block.begin(), block.end(), std::numeric_limits<T>::quiet_NaN());
      continue;
    }
    for (T& v : block)
      v = std::ldexp(static_cast<T>(e2m1_to_float(float_to_e2m1(std::ldexp(v, -shared)))), shared);
  }
}

template void mxfp4_quantize_dequantize<float>(std::span<float>, ActivationQuant);
template void mxfp4_quantize_dequantize<double>(std::span<double>, ActivationQuant);

}  // namespace qmoe
