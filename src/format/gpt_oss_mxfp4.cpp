// gpt-oss MXFP4 (quant_method "mxfp4"), per layer, all experts fused (transformers
// integrations/mxfp4.py `Mxfp4GptOssExperts`, `convert_moe_packed_tensors`,
// models/gpt_oss/modeling_gpt_oss.py):
//   {prefix}gate_up_proj_blocks U8 [E, 2I, H/32, 16]  e2m1 codes, N-first; byte j of block c holds
//                                                    k = 32c + 2j (low nibble) and 32c + 2j + 1
//   {prefix}gate_up_proj_scales U8 [E, 2I, H/32]      e8m0: 2^(s - 127) per 32 values along K
//   {prefix}gate_up_proj_bias   [E, 2I]               float (bf16 on disk), optional here
//   {prefix}down_proj_blocks / _scales / _bias        [E, H, I/32, 16] / [E, H, I/32] / [E, H]
// Rows of gate_up interleave gate and up (row 2i = gate channel i, row 2i + 1 = up channel i); the
// canonical w13 puts the gate rows first, so the adapter de-interleaves (and the writer
// re-interleaves). The blocks flattened are exactly the canonical codes [E, N, K/2].
// quantization_config holds no parameters (the scheme is fixed), only modules_to_not_convert.
#include "format/gpt_oss_mxfp4.hpp"

#include <algorithm>
#include <cstring>

#include "core/check.hpp"
#include "format/adapter.hpp"
#include "format/projection.hpp"
#include "format/quant_method.hpp"
#include "format/tensor_read.hpp"
#include "quant/mxfp4.hpp"

namespace qmoe::format {

namespace {

QuantScheme mxfp4_scheme() {
  return QuantScheme{
      .kind = WeightKind::mxfp4, .bits = 4, .group_size = 32, .source_scale_dtype = DType::u8};
}

// Canonical row r of a weight with `rows` rows lives in stored row stored_row(r): the identity for
// down_proj, the gate/up interleave for gate_up_proj.
int64_t stored_row(int64_t r, int64_t rows, bool interleaved) {
  if (!interleaved) return r;
  const int64_t half = rows / 2;
  return r < half ? 2 * r : 2 * (r - half) + 1;
}

// The part of one fused weight [E, N, K] a load reads: experts `experts`, canonical rows `rows` (in
// this order) and input channels `k` of each; the bias (when stored) with `bias`.
struct FusedPart {
  std::string name;  // prefix + "gate_up_proj" or "down_proj"
  int64_t E = 0, N = 0, K = 0;
  bool interleaved = false;
  Range experts;
  std::vector<int64_t> rows;
  Range k;
  bool bias = true;
};

void check_stored(const TensorStore& store, const FusedPart& w) {
  check(w.K % 32 == 0, "{}: MXFP4 groups 32 values along K, so K = {} must be a multiple of 32",
        w.name, w.K);
  check(w.k.first % 32 == 0 && w.k.count % 32 == 0,
        "{}: input channels [{}, {}) cut an MXFP4 block of 32 (valid: multiples of 32)", w.name,
        w.k.first, w.k.end());
  check(store.find(w.name + "_blocks") != nullptr || store.find(w.name) == nullptr,
        "{}: the experts are stored unquantized ('{}'); qmoe reads quantized experts only", w.name,
        w.name);
  check(store.find(w.name + "_blocks") != nullptr, "{}: checkpoint has no tensor '{}_blocks'",
        store.dir().string(), w.name);
}

// The parts of blocks [E, N, K/32, 16], scales [E, N, K/32] and bias [E, N], each viewed as rows
// of the E * N stored rows: per expert, the stored rows of the canonical rows read (adjacent ones
// in one range), and of each row the bytes of the input channels read.
std::vector<TensorPart> fused_parts(const TensorStore& store, const FusedPart& w) {
  check_stored(store, w);
  std::vector<Range> rows;
  for (int64_t e = w.experts.first; e < w.experts.end(); ++e) {
    for (int64_t r : w.rows) {
      const int64_t row = e * w.N + stored_row(r, w.N, w.interleaved);
      if (!rows.empty() && rows.back().end() == row) {
        ++rows.back().count;
      } else {
        rows.push_back({row, 1});
      }
    }
  }
  const int64_t n = w.experts.count * static_cast<int64_t>(w.rows.size());
  std::vector<TensorPart> parts{{w.name + "_blocks",
                                 {StDType::u8},
                                 {w.E, w.N, w.K / 32, 16},
                                 w.K / 2,
                                 rows,
                                 {w.k.first / 2, w.k.count / 2},
                                 {n, w.k.count / 2}},
                                {w.name + "_scales",
                                 {StDType::u8},
                                 {w.E, w.N, w.K / 32},
                                 w.K / 32,
                                 rows,
                                 {w.k.first / 32, w.k.count / 32},
                                 {n, w.k.count / 32}}};
  if (w.bias && store.find(w.name + "_bias"))
    parts.push_back({w.name + "_bias", kFloatDTypes, {w.E, w.N}, 1, rows, {0, 1}, {n}});
  return parts;
}

std::span<std::byte> bytes_of(Buffer& b) {
  return {static_cast<std::byte*>(b.data()), static_cast<size_t>(b.nbytes())};
}

// Refuses the e8m0 NaN code among the scales read, naming the checkpoint's tensor, expert, stored
// row and block (the canonical form refuses it too, but knows only its own, de-interleaved rows).
void refuse_nan_scales(const TensorInfo& stored, const FusedPart& w, const Buffer& scales) {
  const int64_t rows = static_cast<int64_t>(w.rows.size()), blocks = w.k.count / 32;
  const uint8_t* s = scales.data_as<uint8_t>();
  for (int64_t i = 0; i < scales.numel(); ++i) {
    if (s[i] != kE8m0Nan) continue;
    const int64_t e = w.experts.first + i / (rows * blocks);
    const int64_t row =
        stored_row(w.rows[static_cast<size_t>(i / blocks % rows)], w.N, w.interleaved);
    const int64_t c = w.k.first / 32 + i % blocks;
    const std::string channel =
        w.interleaved ? fmt::format(" ({} channel {})", row % 2 == 0 ? "gate" : "up", row / 2) : "";
    fail("{} ({}): expert {}, row {}{}, block {} (k {}..{}) is 0xff, the e8m0 NaN ({})",
         stored.name, stored.describe(), e, row, channel, c, 32 * c, 32 * c + 31, kE8m0Valid);
  }
}

QuantizedWeight read_weight(const TensorStore& store, const FusedPart& w) {
  const std::vector<TensorPart> parts = fused_parts(store, w);
  const int64_t E = w.experts.count, N = static_cast<int64_t>(w.rows.size()), K = w.k.count;
  QuantizedWeight out;
  out.scheme = mxfp4_scheme();
  out.E = E;
  out.N = N;
  out.K = K;
  out.codes = Buffer(DType::u8, {E, N, K / 2});
  out.scales = Buffer(DType::u8, {E, N, K / 32});
  // Read in canonical row order, the parts are the canonical codes and scales as they are.
  store.read_part(parts[0], bytes_of(out.codes));
  store.read_part(parts[1], bytes_of(out.scales));
  refuse_nan_scales(store.at(parts[1].name), w, out.scales);
  if (parts.size() == 3) {
    const TensorStore bias = store.read_parts({parts[2]});
    const std::vector<float> values = read_floats(bias.at(parts[2].name), E * N);
    out.bias = Buffer(DType::f32, {E, N});
    std::copy(values.begin(), values.end(), out.bias.data_as<float>());
  }
  return out;
}

void write_weight(SafetensorsWriter& out, const std::string& name, const QuantizedWeight& w,
                  bool interleaved, const WriteOptions& options) {
  check(w.scheme.kind == WeightKind::mxfp4, "{}: the mxfp4 format holds mxfp4 weights, not {}",
        name, to_string(w.scheme));
  const int64_t E = w.E, N = w.N, K = w.K;
  std::vector<uint8_t> blocks(static_cast<size_t>(E * N * K / 2));
  std::vector<uint8_t> scales(static_cast<size_t>(E * N * K / 32));
  std::vector<float> bias;
  for (int64_t e = 0; e < E; ++e) {
    for (int64_t r = 0; r < N; ++r) {
      const int64_t to = e * N + stored_row(r, N, interleaved), from = e * N + r;
      std::memcpy(blocks.data() + to * (K / 2), w.codes.data_as<uint8_t>() + from * (K / 2),
                  static_cast<size_t>(K / 2));
      std::memcpy(scales.data() + to * (K / 32), w.scales.data_as<uint8_t>() + from * (K / 32),
                  static_cast<size_t>(K / 32));
    }
  }
  out.add<uint8_t>(name + "_blocks", StDType::u8, {E, N, K / 32, 16}, blocks);
  out.add<uint8_t>(name + "_scales", StDType::u8, {E, N, K / 32}, scales);
  if (w.has_bias()) {
    bias.resize(static_cast<size_t>(E * N));
    for (int64_t e = 0; e < E; ++e)
      for (int64_t r = 0; r < N; ++r)
        bias[static_cast<size_t>(e * N + stored_row(r, N, interleaved))] =
            w.bias.data_as<float>()[e * N + r];
    add_floats(out, name + "_bias", {E, N}, bias, options);
  }
}

class Mxfp4Method final : public QuantMethod {
 public:
  QuantConfig parse(const ordered_json&, std::string_view) const override {
    QuantConfig c;
    c.scheme = mxfp4_scheme();
    return c;
  }

  std::optional<QuantScheme> scheme_for(const QuantConfig& config,
                                        const std::string& module) const override {
    if (not_converted(config.raw, module)) return std::nullopt;
    return config.scheme;
  }
};

}  // namespace

const QuantMethod& mxfp4_method() {
  static const Mxfp4Method method;
  return method;
}

namespace {

// The fused weights' parts of a layer's slice: w13's rows of the channels (gate then up,
// de-interleaved), w2's K slice of them.
std::pair<FusedPart, FusedPart> fused_slice(const std::string& prefix, const MoEConfig& moe,
                                            Range experts, Range channels, bool w2_bias) {
  check(is_gated(moe.activation), "{}: gpt-oss experts are gated (fused gate_up_proj)", prefix);
  const int64_t E = moe.num_experts, H = moe.hidden, I = moe.intermediate;
  FusedPart w13{prefix + "gate_up_proj", E, 2 * I, H, true, experts, {}, {0, H}, true};
  for (const Range r : w13_row_ranges(moe.activation, I, channels))
    for (int64_t row = r.first; row < r.end(); ++row) w13.rows.push_back(row);
  FusedPart w2{prefix + "down_proj", E, H, I, false, experts, {}, channels, w2_bias};
  for (int64_t row = 0; row < H; ++row) w2.rows.push_back(row);
  return {std::move(w13), std::move(w2)};
}

}  // namespace

QuantizedExperts read_mxfp4_experts(const TensorStore& store, const std::string& prefix,
                                    const MoEConfig& moe, Range experts, Range channels,
                                    bool w2_bias) {
  const auto [w13, w2] = fused_slice(prefix, moe, experts, channels, w2_bias);
  QuantizedWeight gate_up = read_weight(store, w13);  // first: its errors come first
  return QuantizedExperts(std::move(gate_up), read_weight(store, w2));
}

int64_t mxfp4_experts_bytes(const TensorStore& store, const std::string& prefix,
                            const MoEConfig& moe, Range experts, Range channels, bool w2_bias) {
  const auto [w13, w2] = fused_slice(prefix, moe, experts, channels, w2_bias);
  int64_t bytes = 0;
  for (const FusedPart* w : {&w13, &w2})
    for (const TensorPart& part : fused_parts(store, *w)) bytes += store.part_bytes(part);
  return bytes;
}

void write_mxfp4_layer(SafetensorsWriter& out, const std::string& prefix, const QuantizedExperts& x,
                       const WriteOptions& options) {
  check(x.gated(), "{}: gpt-oss experts are gated (fused gate_up_proj)", prefix);
  write_weight(out, prefix + "gate_up_proj", x.w13(), true, options);
  write_weight(out, prefix + "down_proj", x.w2(), false, options);
}

}  // namespace qmoe::format
