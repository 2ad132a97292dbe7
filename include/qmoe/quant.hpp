#pragma once
// The canonical, format-free form of a quantized MoE layer's experts (docs/architecture.md):
// the one contract between checkpoint adapters and backends.
#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include "qmoe/tensor.hpp"

namespace qmoe {

enum class WeightKind : uint8_t {
  integer,  // unsigned codes, value = (code - zero) * scale
  mxfp4,    // e2m1 codes with e8m0 scales over groups of 32
};

enum class ZeroPoint : uint8_t {
  none,      // symmetric: implicit zero at the mid-point 2^(bits-1)
  explicit_  // an unsigned zero per (expert, row, group)
};

// What happens to the activations entering a GEMM with this weight. Both mxfp4 values are W4A4:
// the activations are quantized on the fly to MXFP4, one e8m0 scale per 32 values along K; they
// differ in how a block's scale follows its largest magnitude (src/quant/mxfp4.cpp).
enum class ActivationQuant : uint8_t {
  none,        // they stay in the hidden dtype (weight-only, WnA16)
  mxfp4,       // scale 2^(floor(log2 max) - 2): the OCP MX v1.0 rule, Quark's "floor"
  mxfp4_even,  // the same after rounding max up to a power of two from 1.75: Quark's "even"
};

inline constexpr int kChannelwise = -1;

struct QuantScheme {
  WeightKind kind = WeightKind::integer;
  int bits = 4;  // 4 or 8 (mxfp4: 4)
  ZeroPoint zero_point = ZeroPoint::none;
  int group_size = 128;                   // kChannelwise, or any divisor of K
  bool act_order = false;                 // g_idx present: input channel k uses group g_idx[k]
  DType source_scale_dtype = DType::f16;  // what the checkpoint stored (scales are f32 here)
  ActivationQuant activation_quant = ActivationQuant::none;  // mxfp4*: only with mxfp4 weights

  bool has_zero_points() const { return zero_point == ZeroPoint::explicit_; }
  int64_t group_size_for(int64_t K) const { return group_size == kChannelwise ? K : group_size; }
  int64_t groups_for(int64_t K) const { return K / group_size_for(K); }
  int implicit_zero() const { return 1 << (bits - 1); }
  int max_code() const { return (1 << bits) - 1; }
  friend bool operator==(const QuantScheme&, const QuantScheme&) = default;
};

// Throws Error unless bits/group size/kind are a combination qmoe can represent.
void validate(const QuantScheme& scheme);
// e.g. "int4 g128 asym act-order", "mxfp4", "mxfp4 w4a4" (MXFP4 activations too), "mxfp4 w4a4
// (even scales)" (with Quark's even activation scales)
std::string to_string(const QuantScheme& scheme);

// One stacked expert weight, logically [E, N, K] (N = output features, K = input features).
//   codes   u8  [E, N, K/2] for 4-bit (low nibble = even k), [E, N, K] for 8-bit
//   scales  f32 [E, N, K/G] (mxfp4: u8 e8m0 [E, N, K/32])
//   zeros   u8  [E, N, K/G], one unpacked zero per byte (only with explicit zero points)
//   g_idx   i32 [E, K]      (only with act-order)
//   bias    f32 [E, N]      (optional)
struct QuantizedWeight {
  QuantScheme scheme;
  int64_t E = 0, N = 0, K = 0;
  Buffer codes;
  Buffer scales;
  Buffer zeros;
  Buffer g_idx;
  Buffer bias;
  // Act-order w2 of a tensor-parallel shard (K split across ranks) keeps the scale table of the
  // whole K, and g_idx holds groups of that whole K: scales/zeros are [E, N, K_full/G]. 0 = K.
  int64_t K_full = 0;

  bool has_bias() const { return !bias.empty(); }
  // Scale groups along K: K/G, or K_full/G for a K-split act-order shard.
  int64_t groups() const { return scheme.groups_for(K_full > 0 ? K_full : K); }
  int64_t code_bytes_per_row() const { return scheme.bits == 4 ? K / 2 : K; }
  // Unpacked code of element (e, n, k).
  int code(int64_t e, int64_t n, int64_t k) const;
  // Group of input channel k for expert e (g_idx with act-order, k / G otherwise).
  int64_t group_of(int64_t e, int64_t k) const;
  // Dequantized value (code - zero) * scale, in float.
  float dequant(int64_t e, int64_t n, int64_t k) const;

  // Checks every invariant: shapes and dtypes of all parts agree with (E, N, K) and the scheme,
  // the group size divides K, codes/zeros/g_idx are in range, scales finite. `what` names the
  // tensor in messages (e.g. "w13").
  void validate(const std::string& what) const;
  QuantizedWeight clone() const;
};

// w13 = [E, 2I, H] (gate rows 0..I-1, then up rows I..2I-1; [E, I, H] for non-gated
// activations), w2 = [E, H, I]. Construction validates both and their agreement.
class QuantizedExperts {
 public:
  QuantizedExperts(QuantizedWeight w13, QuantizedWeight w2);

  const QuantizedWeight& w13() const { return w13_; }
  const QuantizedWeight& w2() const { return w2_; }
  int64_t num_experts() const { return w13_.E; }
  int64_t hidden() const { return w13_.K; }
  int64_t intermediate() const { return w2_.K; }
  bool gated() const { return w13_.N == 2 * w2_.K; }
  QuantizedExperts clone() const;
  // Gives up both weights (w13, w2), e.g. to free each once it has been converted.
  std::pair<QuantizedWeight, QuantizedWeight> release() &&;

 private:
  QuantizedWeight w13_;
  QuantizedWeight w2_;
};

}  // namespace qmoe
