#include "quant/mxfp4.hpp"

namespace qmoe {

int float_to_e2m1(float x) {
  const int sign = std::signbit(x) ? 8 : 0;
  const float a = std::fabs(x);
  int best = 0;
  float best_err = INFINITY;
  for (int c = 0; c < 8; ++c) {
    const float err = std::fabs(e2m1_to_float(c) - a);
    // Ties go to the even code (the one whose mantissa bit is 0).
    if (err < best_err || (err == best_err && (c & 1) == 0)) {
      best = c;
      best_err = err;
    }
  }
  return sign | best;
}

}  // namespace qmoe
