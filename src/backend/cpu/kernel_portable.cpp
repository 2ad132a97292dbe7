// Plain C++ tile kernel: any CPU, and the reference the SIMD variants are tested against.
#include "backend/cpu/panel_kernel.hpp"
#include "backend/cpu/tile_kernel.hpp"

namespace qmoe::cpu {
namespace {

// e2m1 code -> value: bit 3 is the sign, bits 2..0 index the magnitudes.
constexpr float kE2m1[16] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6, -0.0f, -0.5f, -1, -1.5f, -2, -3, -4, -6};

struct Simd {
  struct Rows {
    float v[kHalfRows];
  };
  static constexpr int kMaxTokens = 4;

  static Rows splat(float f) {
    Rows r;
    for (float& v : r.v) v = f;
    return r;
  }
  static Rows zero() { return splat(0.0f); }
  static Rows load(const float* p) {
    Rows r;
    for (int i = 0; i < kHalfRows; ++i) r.v[i] = p[i];
    return r;
  }
  static Rows load_u8(const uint8_t* p) {
    Rows r;
    for (int i = 0; i < kHalfRows; ++i) r.v[i] = static_cast<float>(p[i]);
    return r;
  }
  static Rows add(Rows a, Rows b) {
    for (int i = 0; i < kHalfRows; ++i) a.v[i] += b.v[i];
    return a;
  }
  static Rows mul_add(Rows a, Rows b, Rows c) {
    for (int i = 0; i < kHalfRows; ++i) c.v[i] += a.v[i] * b.v[i];
    return c;
  }
  static void codes4(const uint8_t* p, Rows& lo, Rows& hi) {
    for (int i = 0; i < kHalfRows; ++i) {
      lo.v[i] = static_cast<float>(p[i] & 0x0f);
      hi.v[i] = static_cast<float>(p[i] >> 4);
    }
  }
  static void e2m1_codes4(const uint8_t* p, Rows& lo, Rows& hi) {
    for (int i = 0; i < kHalfRows; ++i) {
      lo.v[i] = kE2m1[p[i] & 0x0f];
      hi.v[i] = kE2m1[p[i] >> 4];
    }
  }
  static Rows codes8(const uint8_t* p) { return load_u8(p); }
  static Rows e8m0(const uint8_t* p) {
    Rows r;
    for (int i = 0; i < kHalfRows; ++i) {
      const int bits = p[i] << kE8m0Shift;
      r.v[i] = __builtin_bit_cast(float, bits > kE8m0ZeroBits ? bits : kE8m0ZeroBits);
    }
    return r;
  }
  static Rows fma(Rows w, float x, Rows acc) {
    for (int i = 0; i < kHalfRows; ++i) acc.v[i] += w.v[i] * x;
    return acc;
  }
  static void store(float* p, Rows r) {
    for (int i = 0; i < kHalfRows; ++i) p[i] = r.v[i];
  }
  static void prefetch(const uint8_t* p) { __builtin_prefetch(p); }
};

void run(const PanelFormat& format, const PanelTile& tile) { run_panel_tile<Simd>(format, tile); }

}  // namespace

TileKernel tile_kernel_portable() { return {Isa::portable, Simd::kMaxTokens, &run}; }

}  // namespace qmoe::cpu
