#include <fmt/format.h>

#include "core/check.hpp"
#include "qmoe/quant.hpp"

namespace qmoe {

void validate(const QuantScheme& s) {
  check(s.activation_quant == ActivationQuant::none || s.kind == WeightKind::mxfp4,
        "MXFP4 activations (w4a4) go with mxfp4 weights only (OCP MX W4A4), got {} weights; "
        "valid: mxfp4 weights with or without MXFP4 activations, other weights without",
        to_string(s));
  if (s.kind == WeightKind::mxfp4) {
    check(s.bits == 4 && s.group_size == 32 && !s.has_zero_points() && !s.act_order,
          "mxfp4 weights are 4-bit e2m1 with one e8m0 scale per 32 values, no zero points and no "
          "act-order (got {})",
          to_string(s));
    return;
  }
  check(s.bits == 4 || s.bits == 8, "weight bits must be 4 or 8, got {}", s.bits);
  check(s.group_size == kChannelwise || s.group_size > 0,
        "group size must be positive or -1 (channelwise), got {}", s.group_size);
  check(!(s.act_order && s.group_size == kChannelwise),
        "act-order needs grouped scales; channelwise scales make the permutation meaningless");
}

std::string to_string(const QuantScheme& s) {
  if (s.kind == WeightKind::mxfp4) {
    switch (s.activation_quant) {
      case ActivationQuant::none: return "mxfp4";
      case ActivationQuant::mxfp4: return "mxfp4 w4a4";
      case ActivationQuant::mxfp4_even: return "mxfp4 w4a4 (even scales)";
    }
  }
  std::string text = fmt::format("int{} ", s.bits);
  text +=
      s.group_size == kChannelwise ? std::string("channelwise") : fmt::format("g{}", s.group_size);
  text += s.has_zero_points() ? " asym" : " sym";
  if (s.act_order) text += " act-order";
  return text;
}

}  // namespace qmoe
