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

#include <cstring>

#include "core/check.hpp"
#include "format/adapter.hpp"
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

// Refuses the e8m0 NaN code in stored row `row` of expert e, naming the checkpoint's tensor and
// block (the canonical form refuses it too, but knows only its own, de-interleaved rows).
void refuse_nan_scales(const TensorInfo& scales, int64_t e, int64_t row, int64_t rows,
                       bool interleaved) {
  const int64_t blocks = scales.shape.back();
  const auto* s = reinterpret_cast<const uint8_t*>(scales.bytes.data()) + (e * rows + row) * blocks;
  for (int64_t c = 0; c < blocks; ++c) {
    if (s[c] != kE8m0Nan) continue;
    const std::string channel =
        interleaved ? fmt::format(" ({} channel {})", row % 2 == 0 ? "gate" : "up", row / 2) : "";
    fail("{} ({}): expert {}, row {}{}, block {} (k {}..{}) is 0xff, the e8m0 NaN ({})",
         scales.name, scales.describe(), e, row, channel, c, 32 * c, 32 * c + 31, kE8m0Valid);
  }
}

QuantizedWeight read_weight(const TensorStore& store, const std::string& name, int64_t E, int64_t N,
                            int64_t K, bool interleaved) {
  check(K % 32 == 0, "{}: MXFP4 groups 32 values along K, so K = {} must be a multiple of 32", name,
        K);
  const TensorInfo* blocks = store.find(name + "_blocks");
  check(blocks != nullptr || store.find(name) == nullptr,
        "{}: the experts are stored unquantized ('{}'); qmoe reads quantized experts only", name,
        name);
  check(blocks != nullptr, "{}: checkpoint has no tensor '{}_blocks'", store.dir().string(), name);
  expect_tensor(*blocks, {StDType::u8}, {E, N, K / 32, 16});
  const TensorInfo& scales = store.at(name + "_scales");
  expect_tensor(scales, {StDType::u8}, {E, N, K / 32});
  QuantizedWeight w;
  w.scheme = mxfp4_scheme();
  w.E = E;
  w.N = N;
  w.K = K;
  w.codes = Buffer(DType::u8, {E, N, K / 2});
  w.scales = Buffer(DType::u8, {E, N, K / 32});
  for (int64_t e = 0; e < E; ++e) {
    for (int64_t r = 0; r < N; ++r) {
      const int64_t stored = stored_row(r, N, interleaved);
      refuse_nan_scales(scales, e, stored, N, interleaved);
      const int64_t from = e * N + stored, to = e * N + r;
      std::memcpy(w.codes.data_as<uint8_t>() + to * (K / 2), blocks->bytes.data() + from * (K / 2),
                  static_cast<size_t>(K / 2));
      std::memcpy(w.scales.data_as<uint8_t>() + to * (K / 32),
                  scales.bytes.data() + from * (K / 32), static_cast<size_t>(K / 32));
    }
  }
  if (const TensorInfo* bias = store.find(name + "_bias")) {
    const Matrix<float> b = read_floats(*bias, E, N);
    w.bias = Buffer(DType::f32, {E, N});
    for (int64_t e = 0; e < E; ++e)
      for (int64_t r = 0; r < N; ++r)
        w.bias.data_as<float>()[e * N + r] = b.at(e, stored_row(r, N, interleaved));
  }
  return w;
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

QuantizedExperts read_mxfp4_layer(const TensorStore& store, const std::string& prefix,
                                  const MoEConfig& moe) {
  check(is_gated(moe.activation), "{}: gpt-oss experts are gated (fused gate_up_proj)", prefix);
  const int64_t E = moe.num_experts, H = moe.hidden, I = moe.intermediate;
  QuantizedWeight w13 = read_weight(store, prefix + "gate_up_proj", E, 2 * I, H, true);
  QuantizedWeight w2 = read_weight(store, prefix + "down_proj", E, H, I, false);
  return QuantizedExperts(std::move(w13), std::move(w2));
}

void write_mxfp4_layer(SafetensorsWriter& out, const std::string& prefix, const QuantizedExperts& x,
                       const WriteOptions& options) {
  check(x.gated(), "{}: gpt-oss experts are gated (fused gate_up_proj)", prefix);
  write_weight(out, prefix + "gate_up_proj", x.w13(), true, options);
  write_weight(out, prefix + "down_proj", x.w2(), false, options);
}

}  // namespace qmoe::format
