#pragma once
// Activations on the GEMM1 output. Gated ones read [rows, 2I] and write [rows, I]; the *_no_mul
// ones read and write [rows, I]. The formulas are the functions below.
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "qmoe/config.hpp"

namespace qmoe {

template <class T>
T silu(T x) {
  return x / (T(1) + std::exp(-x));
}
template <class T>
T gelu_erf(T x) {
  return T(0.5) * x * (T(1) + std::erf(x * T(0.70710678118654752440)));
}
template <class T>
T gelu_tanh(T x) {
  const T sqrt_2_over_pi = T(0.79788456080286535588);
  return T(0.5) * x * (T(1) + std::tanh(sqrt_2_over_pi * (x + T(0.044715) * x * x * x)));
}
// Clamped SwiGLU of gpt-oss / MiniMax: gate clamped above only, up clamped both ways.
template <class T>
T swiglu_clamped(T gate, T up, const ActivationParams& p) {
  const T limit = T(p.limit);
  const T g = std::min(gate, limit);
  const T u = std::clamp(up, -limit, limit);
  return g / (T(1) + std::exp(-T(p.alpha) * g)) * (u + T(p.beta));
}

// One output element j of row `in` (length 2I for gated, I otherwise).
template <class T>
T activation_at(Activation a, const ActivationParams& p, const T* in, int64_t I, int64_t j) {
  switch (a) {
    case Activation::silu: return silu(in[j]) * in[I + j];
    case Activation::gelu: return gelu_erf(in[j]) * in[I + j];
    case Activation::gelu_tanh: return gelu_tanh(in[j]) * in[I + j];
    case Activation::swigluoai: {
      ActivationParams oai = p;
      oai.beta = 1.0f;  // the interleaved gpt-oss form always adds 1 to up
      return swiglu_clamped(in[2 * j], in[2 * j + 1], oai);
    }
    case Activation::swigluoai_uninterleave: return swiglu_clamped(in[j], in[I + j], p);
    case Activation::silu_no_mul: return silu(in[j]);
    case Activation::gelu_no_mul: return gelu_erf(in[j]);
    case Activation::gelu_tanh_no_mul: return gelu_tanh(in[j]);
    case Activation::relu2_no_mul: return in[j] > T(0) ? in[j] * in[j] : T(0);
  }
  return T(0);
}

// in: [rows, 2I or I] (per is_gated), out: [rows, I], both row-major.
template <class T>
void apply_activation(Activation a, const ActivationParams& p, const T* in, int64_t rows, int64_t I,
                      T* out);

}  // namespace qmoe
