#pragma once
// The activation formulas on the device, fp32 in and out (the CPU reference,
// src/act/activation.hpp, defines each one): shared by the activation kernel and by the GEMM
// epilogues that apply the activation themselves.
#include "qmoe/config.hpp"

namespace qmoe {

// x sigmoid(s x) by the fast exponential and divide: both within a few ulp of fp32 (the
// exponential's error grows with |s x|: at most 37 ulp, 4.4e-6 relative, at |s x| = 30), below the
// rounding of the 16-bit outputs, and ~4x fewer instructions than expf and an IEEE divide. Limits
// hold: for s x below about -87 the quotient is 0 (the divisor above 2^126 or infinite).
__device__ __forceinline__ float times_sigmoid(float x, float s) {
  return __fdividef(x, 1.0f + __expf(-s * x));
}
__device__ __forceinline__ float silu(float x) { return times_sigmoid(x, 1.0f); }
__device__ __forceinline__ float gelu_erf(float x) {
  return 0.5f * x * (1.0f + erff(x * 0.70710678118654752440f));
}
__device__ __forceinline__ float gelu_tanh(float x) {
  const float sqrt_2_over_pi = 0.79788456080286535588f;
  return 0.5f * x * (1.0f + tanhf(sqrt_2_over_pi * (x + 0.044715f * x * x * x)));
}
// gpt-oss / MiniMax clamped SwiGLU: gate clamped above only, up both ways.
__device__ __forceinline__ float swiglu_clamped(float gate, float up, float alpha, float limit,
                                                float beta) {
  const float g = fminf(gate, limit);
  const float u = fminf(fmaxf(up, -limit), limit);
  return times_sigmoid(g, alpha) * (u + beta);
}

template <Activation A>
__device__ __forceinline__ float gated(float gate, float up, const ActivationParams& p) {
  if constexpr (A == Activation::silu) return silu(gate) * up;
  if constexpr (A == Activation::gelu) return gelu_erf(gate) * up;
  if constexpr (A == Activation::gelu_tanh) return gelu_tanh(gate) * up;
  if constexpr (A == Activation::swigluoai) return swiglu_clamped(gate, up, p.alpha, p.limit, 1.0f);
  if constexpr (A == Activation::swigluoai_uninterleave)
    return swiglu_clamped(gate, up, p.alpha, p.limit, p.beta);
  return 0.0f;
}

template <Activation A>
__device__ __forceinline__ float single(float x) {
  if constexpr (A == Activation::silu_no_mul) return silu(x);
  if constexpr (A == Activation::gelu_no_mul) return gelu_erf(x);
  if constexpr (A == Activation::gelu_tanh_no_mul) return gelu_tanh(x);
  if constexpr (A == Activation::relu2_no_mul) return x > 0.0f ? x * x : 0.0f;
  return 0.0f;
}

__host__ __device__ constexpr bool gated_kind(Activation a) {
  return a == Activation::silu || a == Activation::gelu || a == Activation::gelu_tanh ||
         a == Activation::swigluoai || a == Activation::swigluoai_uninterleave;
}

// X(name) for every activation (qmoe/config.hpp's enum): the one list the dispatchers switch over.
// clang-format off
#define QMOE_EACH_ACTIVATION(X)                                            \
  X(silu) X(gelu) X(gelu_tanh) X(swigluoai) X(swigluoai_uninterleave) \
  X(silu_no_mul) X(gelu_no_mul) X(gelu_tanh_no_mul) X(relu2_no_mul)
// clang-format on

// Calls f.template operator()<A>() with a as a compile-time A, so a kernel picks its activation
// once instead of once per value; f is not called for a value outside the enum. Device code only
// (host launches switch over QMOE_EACH_ACTIVATION themselves): a __host__ __device__ form would
// need its host-side check turned off, which also hides a host-only f given to it on the device.
template <class F>
__device__ __forceinline__ void with_activation(Activation a, F&& f) {
  switch (a) {
#define QMOE_ACTIVATION_CASE(name) \
  case Activation::name: f.template operator()<Activation::name>(); return;
    QMOE_EACH_ACTIVATION(QMOE_ACTIVATION_CASE)
#undef QMOE_ACTIVATION_CASE
  }
}

// The activation chosen at run time, one uniform branch per value: for loops that apply it to a
// value or two per thread, where a copy of the loop per activation would only add code.
__device__ __forceinline__ float apply_gated(Activation a, float gate, float up,
                                             const ActivationParams& p) {
  float r = 0.0f;
  with_activation(a, [&]<Activation A>() {
    if constexpr (gated_kind(A)) r = gated<A>(gate, up, p);
  });
  return r;
}

__device__ __forceinline__ float apply_single(Activation a, float x) {
  float r = 0.0f;
  with_activation(a, [&]<Activation A>() {
    if constexpr (!gated_kind(A)) r = single<A>(x);
  });
  return r;
}

}  // namespace qmoe
