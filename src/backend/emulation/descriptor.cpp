// What `emulation` runs: everything the canonical representation can hold, because it
// dequantizes to float and does plain loops. Never chosen by "auto" (it is slow): only by name.
#include "oracle/descriptor.hpp"

namespace qmoe {

const BackendDescriptor& emulation_descriptor() {
  static const BackendDescriptor d = [] {
    BackendDescriptor b;
    b.name = "emulation";
    b.summary = "reference: dequantize to float, plain loops (slow; only when asked for)";
    b.opt_in_only = true;
    b.build_hint = "it is part of every build";
    b.device = DeviceKind::cpu;
    b.int_bits = {4, 8};
    b.mxfp4 = true;
    b.mxfp4_activations = true;
    b.zero_points = true;
    b.group_sizes = {kChannelwise, kAnyGroupDividingK};
    b.act_order = true;
    b.act_order_uneven_groups = true;
    b.act_order_split_k = true;
    b.activations = all_activations();
    b.activation_dtypes = {DType::f32, DType::f16, DType::bf16};
    b.bias = true;
    b.router_weight_on_input = true;
    b.activation_formats = {ActivationFormat::standard, ActivationFormat::batched_experts};
    return b;
  }();
  return d;
}

}  // namespace qmoe
