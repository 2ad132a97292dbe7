#include "backend/cuda_wgmma/mxfp4_recode.hpp"

#include <algorithm>
#include <cmath>

#include "core/check.hpp"
#include "qmoe/dtype.hpp"
#include "quant/mxfp4.hpp"

namespace qmoe::cuda_wgmma {

namespace {

constexpr int kWindowBlocks = kTileK / kMxBlock;
constexpr int kTopShift = 6;  // s of the header: 6 * 2^6 = 384 <= 448

// The smallest power of two the activation dtype holds (its smallest subnormal): bf16 2^-133,
// f16 2^-24.
int smallest_exponent(DType act) { return act == DType::bf16 ? -133 : -24; }

uint16_t bits_of_power_of_two(int exponent, DType act) {
  const float v = std::ldexp(1.0f, exponent);
  return act == DType::bf16 ? to_bf16(v).bits : to_half(v).bits;
}

}  // namespace

int e4m3_exactly(double v) {
  if (!std::isfinite(v)) return -1;
  const int sign = std::signbit(v) ? 0x80 : 0;
  const double a = std::fabs(v);
  if (a == 0) return sign;
  int e = 0;
  const double m = std::frexp(a, &e);  // a = m * 2^e, m in [0.5, 1): 1.f * 2^(e-1)
  const int exponent = e - 1;
  if (exponent > 8) return -1;
  if (exponent >= -6) {  // normal: 1.fff * 2^exponent, biased by 7
    const double fraction = (2 * m - 1) * 8;
    if (fraction != std::floor(fraction)) return -1;
    const int byte = sign | (exponent + 7) << 3 | int(fraction);
    return (byte & 0x7f) == 0x7f ? -1 : byte;  // S.1111.111 is NaN
  }
  const double steps = a / std::ldexp(1.0, -9);  // subnormal: k * 2^-9, k = 1..7
  if (steps != std::floor(steps) || steps > 7) return -1;
  return sign | int(steps);
}

void recode_mxfp4(const QuantizedWeight& w, DType act, const std::string& what,
                  std::span<const int32_t> rows, HostKernelWeight& h) {
  check(w.K % kTileK == 0, "cuda-wgmma: mxfp4 {} has K = {}; the kernel needs a multiple of {}",
        what, w.K, kTileK);
  const int64_t blocks = w.K / kMxBlock, windows = w.K / kTileK;
  const uint8_t* codes = w.codes.data_as<uint8_t>();
  const uint8_t* scales = w.scales.data_as<uint8_t>();
  h.group_size = kTileK;
  h.codes.assign(size_t(w.E * w.N * w.K), 0);
  h.scales.assign(size_t(w.E * windows * w.N), 0);
  h.zero_terms.clear();
  for (int64_t e = 0; e < w.E; ++e)
    for (int64_t n = 0; n < w.N; ++n) {
      const int64_t source = e * w.N + (rows.empty() ? n : rows[size_t(e * w.N + n)]);
      const uint8_t* row_codes = codes + source * (w.K / 2);
      const uint8_t* row_scales = scales + source * blocks;
      uint8_t* out = h.codes.data() + (e * w.N + n) * w.K;
      for (int64_t win = 0; win < windows; ++win) {
        const int64_t first = win * kWindowBlocks;
        int top = -1;  // E_max over the window's blocks holding a nonzero code
        for (int64_t b = first; b < first + kWindowBlocks; ++b)
          for (int64_t k = b * kMxBlock; k < (b + 1) * kMxBlock; ++k)
            if (((row_codes[k / 2] >> (4 * (k % 2))) & 7) != 0)
              top = std::max<int>(top, row_scales[b]);
        if (top < 0) top = 127;  // all zeros: any scale
        const int shift = std::min(kTopShift, top - 127 - smallest_exponent(act));
        const int scale_exponent = top - 127 - shift;
        check(scale_exponent <= (act == DType::bf16 ? 127 : 15),
              "cuda-wgmma: mxfp4 {} expert {} row {} channels {}..{}: weights up to 6 * 2^{} do "
              "not fit {} activations",
              what, e, n, win * kTileK, (win + 1) * kTileK - 1, top - 127, name(act));
        h.scales[size_t((e * windows + win) * w.N + n)] = bits_of_power_of_two(scale_exponent, act);
        for (int64_t k = win * kTileK; k < (win + 1) * kTileK; ++k) {
          const int code = (row_codes[k / 2] >> (4 * (k % 2))) & 0xF;
          const int block_exponent = row_scales[k / kMxBlock];
          const double value =
              std::ldexp(double(e2m1_to_float(code)), block_exponent - 127 - scale_exponent);
          const int byte = (code & 7) == 0 ? 0 : e4m3_exactly(value);
          check(byte >= 0,
                "cuda-wgmma: mxfp4 {} expert {} row {} channels {}..{}: block scales 2^{} and 2^{} "
                "are too far apart to share one scale exactly (at most 2^{} apart; the oracle "
                "refuses such layers)",
                what, e, n, win * kTileK, (win + 1) * kTileK - 1, top - 127, block_exponent - 127,
                shift + 7);
          out[k] = uint8_t(byte);
        }
      }
    }
}

}  // namespace qmoe::cuda_wgmma
