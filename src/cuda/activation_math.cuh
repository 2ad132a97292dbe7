#pragma once
// The activation formulas on the device, fp32 in and out (the CPU reference,
// src/act/activation.hpp, defines each one): shared by the activation kernel and by the GEMM
// epilogues that apply the activation themselves.
#include "qmoe/config.hpp"

namespace qmoe {

__device__ __forceinline__ float silu(float x) { return x / (1.0f + expf(-x)); }
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
  return g / (1.0f + expf(-alpha * g)) * (u + beta);
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

// The same, chosen at run time (one uniform branch per call): for kernels that are not
// instantiated per activation.
__device__ __forceinline__ float apply_gated(Activation a, float gate, float up,
                                             const ActivationParams& p) {
  switch (a) {
    case Activation::silu: return gated<Activation::silu>(gate, up, p);
    case Activation::gelu: return gated<Activation::gelu>(gate, up, p);
    case Activation::gelu_tanh: return gated<Activation::gelu_tanh>(gate, up, p);
    case Activation::swigluoai: return gated<Activation::swigluoai>(gate, up, p);
    case Activation::swigluoai_uninterleave:
      return gated<Activation::swigluoai_uninterleave>(gate, up, p);
    default: return 0.0f;
  }
}

__device__ __forceinline__ float apply_single(Activation a, float x) {
  switch (a) {
    case Activation::silu_no_mul: return single<Activation::silu_no_mul>(x);
    case Activation::gelu_no_mul: return single<Activation::gelu_no_mul>(x);
    case Activation::gelu_tanh_no_mul: return single<Activation::gelu_tanh_no_mul>(x);
    case Activation::relu2_no_mul: return single<Activation::relu2_no_mul>(x);
    default: return 0.0f;
  }
}

}  // namespace qmoe
