#include "backend/cuda_wgmma/mxfp4_recode.hpp"

#include <algorithm>
#include <array>
#include <cmath>

#include "core/check.hpp"
#include "qmoe/dtype.hpp"
#include "quant/mxfp4.hpp"
#include "quant/mxfp4_windows.hpp"

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

namespace {

// e4m3 bytes of e2m1(c) * 2^shift for every code c and every shift a window can ask for (from
// kTopShift down past what e4m3 holds: -1 where it does not hold it exactly). Re-coding a
// layer looks each code up here instead of working it out: billions of weights per model.
class CodeTable {
 public:
  static constexpr int kLowest = -40;

  CodeTable() {
    for (int shift = kLowest; shift <= kTopShift; ++shift)
      for (int c = 0; c < 16; ++c)
        bytes_[size_t(shift - kLowest)][size_t(c)] =
            int16_t((c & 7) == 0 ? 0 : e4m3_exactly(std::ldexp(double(e2m1_to_float(c)), shift)));
  }
  // nullptr when some code's byte is not exact at `shift`.
  const int16_t* row(int shift) const {
    if (shift < kLowest) return nullptr;
    const auto& r = bytes_[size_t(shift - kLowest)];
    return std::ranges::any_of(r, [](int16_t b) { return b < 0; }) ? nullptr : r.data();
  }

 private:
  std::array<std::array<int16_t, 16>, kTopShift - kLowest + 1> bytes_{};
};

}  // namespace

void recode_mxfp4(const QuantizedWeight& w, DType act, const std::string& what,
                  std::span<const int32_t> rows, HostKernelWeight& h) {
  check(w.K % kTileK == 0, "cuda-wgmma: mxfp4 {} has K = {}; the kernel needs a multiple of {}",
        what, w.K, kTileK);
  static const CodeTable table;
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
          if (mxfp4_block_holds_nonzero(row_codes + b * kMxBlock / 2))
            top = std::max<int>(top, row_scales[b]);
        if (top < 0) top = 127;  // all zeros: any scale
        const int shift = std::min(kTopShift, top - 127 - smallest_exponent(act));
        const int scale_exponent = top - 127 - shift;
        // The window's largest weight, 6 * 2^(top - 127) = 1.5 * 2^(top - 125), must be finite.
        check(top - 125 <= (act == DType::bf16 ? 127 : 15),
              "cuda-wgmma: mxfp4 {} expert {} row {} channels {}..{}: weights up to 6 * 2^{} do "
              "not fit {} activations",
              what, e, n, win * kTileK, (win + 1) * kTileK - 1, top - 127, name(act));
        h.scales[size_t((e * windows + win) * w.N + n)] = bits_of_power_of_two(scale_exponent, act);
        for (int64_t b = first; b < first + kWindowBlocks; ++b) {
          const uint8_t* block_codes = row_codes + b * kMxBlock / 2;
          if (!mxfp4_block_holds_nonzero(block_codes)) continue;  // zeros: already 0
          const int16_t* bytes = table.row(row_scales[b] - 127 - scale_exponent);
          check(bytes != nullptr,
                "cuda-wgmma: mxfp4 {} expert {} row {} channels {}..{}: block scales 2^{} and "
                "2^{} are too far apart to share one scale exactly (at most 2^{} apart; the "
                "oracle refuses such layers)",
                what, e, n, win * kTileK, (win + 1) * kTileK - 1, top - 127, row_scales[b] - 127,
                shift + kMxfp4WindowSpreadLimit - kTopShift);
          uint8_t* block_out = out + b * kMxBlock;
          for (int i = 0; i < kMxBlock / 2; ++i) {  // low nibble: the even channel
            block_out[2 * i] = uint8_t(bytes[block_codes[i] & 0xF]);
            block_out[2 * i + 1] = uint8_t(bytes[block_codes[i] >> 4]);
          }
        }
      }
    }
}

}  // namespace qmoe::cuda_wgmma
