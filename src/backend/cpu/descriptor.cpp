// What the `cpu` backend runs (src/backend/cpu/): int4/int8 and MXFP4 panels dequantized on the
// fly (MXFP4: e2m1 codes through a lookup table, e8m0 scales as f32 powers of two), AVX-512
// or AVX2+FMA chosen at run time with a portable fallback, so x86-64 is the only requirement.
// Group sizes: any divisor of K whose codes fill whole bytes (even groups for int4, any group for
// int8). Act-order becomes a permutation of K at
// prepare, which needs groups of equal size, so a K-split act-order shard is not supported.
#include "oracle/descriptor.hpp"

namespace qmoe {

const BackendDescriptor& cpu_descriptor() {
  static const BackendDescriptor d = [] {
    BackendDescriptor b;
    b.name = "cpu";
    b.summary = "x86-64: threads + AVX-512 / AVX2+FMA (portable fallback), dequant on the fly";
    b.build_hint = "its sources are not in this build";
    b.device = DeviceKind::cpu;
    b.cpu_features = {CpuFeature::x86_64};
    b.int_bits = {4, 8};
    b.mxfp4 = true;
    b.zero_points = true;
    b.group_sizes = {kChannelwise, kAnyGroupDividingK};
    b.group_fills_whole_bytes = true;
    b.act_order = true;
    b.activations = all_activations();
    b.activation_dtypes = {DType::f32, DType::f16, DType::bf16};
    b.bias = true;
    b.router_weight_on_input = true;
    return b;
  }();
  return d;
}

}  // namespace qmoe
