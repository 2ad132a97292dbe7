#pragma once
// Layers and devices the oracle tests are written against.
#include "oracle/descriptor.hpp"
#include "qmoe/device.hpp"
#include "qmoe/error.hpp"
#include "qmoe/oracle.hpp"

namespace qmoe::test {

inline QuantScheme int_scheme(int bits, int group, bool zp = false, bool act_order = false) {
  return QuantScheme{.bits = bits,
                     .zero_point = zp ? ZeroPoint::explicit_ : ZeroPoint::none,
                     .group_size = group,
                     .act_order = act_order};
}

inline QuantScheme mxfp4_scheme() {
  return QuantScheme{.kind = WeightKind::mxfp4, .bits = 4, .group_size = 32};
}

// A layer no automatic backend runs, only the emulation reference: 4-bit groups of 3 codes fill
// no whole bytes (cpu) and are no multiple of 32 (the CUDA backends).
inline LayerDesc emulation_only_layer();

// A Qwen3-30B-A3B-like layer: int4 g128 symmetric, 128 experts, top-8, silu, bf16.
inline LayerDesc base_layer() {
  LayerDesc l;
  l.w13_scheme = l.w2_scheme = int_scheme(4, 128);
  l.num_experts = 128;
  l.hidden = 2048;
  l.intermediate = 768;
  l.top_k = 8;
  l.activation = Activation::silu;
  l.activation_dtype = DType::bf16;
  return l;
}

inline LayerDesc emulation_only_layer() {
  LayerDesc l = base_layer();
  l.w13_scheme = l.w2_scheme = int_scheme(4, 3);
  l.hidden = 192;
  l.intermediate = 96;
  return l;
}

// A shipped descriptor by name; an Error when the oracle does not know it.
inline const BackendDescriptor& descriptor(std::string_view name) {
  const BackendDescriptor* d = find_descriptor(name);
  if (!d) throw Error("the oracle has no descriptor named " + std::string(name));
  return *d;
}

inline LayerDesc with_scheme(LayerDesc l, const QuantScheme& s) {
  l.w13_scheme = l.w2_scheme = s;
  return l;
}

}  // namespace qmoe::test
