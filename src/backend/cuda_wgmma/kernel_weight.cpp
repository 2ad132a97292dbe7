#include "backend/cuda_wgmma/kernel_weight.hpp"

#include "core/check.hpp"
#include "cuda/cuda_check.hpp"

namespace qmoe::cuda_wgmma {

namespace {

uint16_t bits_of(float v, DType act) {
  return act == DType::bf16 ? to_bf16(v).bits : to_half(v).bits;
}
float rounded(float v, DType act) {
  return act == DType::bf16 ? to_float(to_bf16(v)) : to_float(to_half(v));
}

}  // namespace

HostKernelWeight to_kernel_layout(const QuantizedWeight& w, DType act, const std::string& what) {
  const QuantScheme& s = w.scheme;
  check(s.kind == WeightKind::integer, "cuda-wgmma: {} is {}; only integer weights are supported",
        what, to_string(s));
  check(!s.act_order, "cuda-wgmma: {} uses act-order (g_idx), which this kernel does not run",
        what);
  check(act == DType::bf16 || act == DType::f16,
        "cuda-wgmma: activations must be bf16 or f16, got {}", name(act));
  HostKernelWeight h;
  h.group_size = int(s.group_size_for(w.K));
  // Unsigned code c -> signed c - 2^(bits-1): flipping the top bit of each code does it.
  const uint8_t flip = s.bits == 4 ? 0x88 : 0x80;
  const auto* codes = w.codes.data_as<uint8_t>();
  h.codes.resize(size_t(w.codes.numel()));
  for (size_t i = 0; i < h.codes.size(); ++i) h.codes[i] = codes[i] ^ flip;

  const int64_t G = w.groups();
  const auto* scales = w.scales.data_as<float>();
  const auto* zeros = s.has_zero_points() ? w.zeros.data_as<uint8_t>() : nullptr;
  h.scales.resize(size_t(w.E * G * w.N));
  if (zeros) h.zero_terms.resize(h.scales.size());
  for (int64_t e = 0; e < w.E; ++e)
    for (int64_t n = 0; n < w.N; ++n)
      for (int64_t g = 0; g < G; ++g) {
        const int64_t from = (e * w.N + n) * G + g, to = (e * G + g) * w.N + n;
        h.scales[size_t(to)] = bits_of(scales[from], act);
        // weight = scale16 * (c - mid) + zero_term = scale16 * (c - zero), exactly
        if (zeros) {
          const float shift = float(s.implicit_zero() - int(zeros[from]));
          h.zero_terms[size_t(to)] = shift * rounded(scales[from], act);
        }
      }
  return h;
}

KernelWeight make_kernel_weight(const QuantizedWeight& w, DType act, const std::string& what) {
  HostKernelWeight h = to_kernel_layout(w, act, what);
  KernelWeight k;
  k.variant = Variant{w.scheme.bits, act};
  k.E = w.E;
  k.N = w.N;
  k.K = w.K;
  k.group_size = h.group_size;
  const GemmOps* ops = gemm_ops(k.variant, kFullTileTokens);
  check(ops != nullptr && gemm_ops(k.variant, kTailTileTokens) != nullptr,
        "cuda-wgmma: no kernel for int{} {} activations in this build", w.scheme.bits, name(act));
  k.codes = to_device(h.codes);
  k.scales = to_device(h.scales);
  k.zero_terms = to_device(h.zero_terms);
  {
    DeviceBuffer scratch(size_t(w.N * w.K));
    QMOE_CUDA_CHECK(ops->shuffle_codes(k, scratch.data(), nullptr));
  }
  ops->make_static_args(k);
  return k;
}

}  // namespace qmoe::cuda_wgmma
