// compressed-tensors "pack-quantized", per projection of N outputs x K inputs, stored N-first
// (spec/vllm-wna16-moe.md §3.3; compressed-tensors compressors/pack_quantized/{base.py,
// helpers.py} `pack_to_int32` / `unpack_from_int32`, quantization/quant_args.py):
//   weight_packed     I32 [N, ceil(K/pf)]  packed along K: code (n, k) is field k % pf of
//                                          weight_packed[n][k / pf]
//   weight_scale      F16/BF16/F32 [N, G]  (channel strategy: G = 1)
//   weight_zero_point I32 [ceil(N/pf), G]  asymmetric only; packed along N (packed_dim 0):
//                                          zero (n, g) is field n % pf of [n / pf][g]
//   weight_g_idx      I32 [K]              actorder "group" only
//   weight_shape      I64 (older: I32) [2] = [N, K]
// Values are signed in the quantizer and stored offset by 2^(bits-1) (weights and zero points
// alike), so the stored unsigned fields are exactly the canonical codes and zeros: for symmetric
// schemes a stored 2^(bits-1) means 0, the canonical implicit zero.
#include "core/check.hpp"
#include "format/adapter.hpp"
#include "format/tensor_read.hpp"

namespace qmoe::format {

namespace {

class CompressedTensorsAdapter final : public FormatAdapter {
 public:
  std::string_view packed_suffix() const override { return "weight_packed"; }
  std::string_view scales_suffix() const override { return "weight_scale"; }

  Projection read(const TensorStore& store, const ProjectionSpec& spec) const override {
    const QuantScheme& s = spec.scheme;
    const int pf = pack_factor(s.bits);
    const int64_t N = spec.N, K = spec.K, G = s.groups_for(K);
    check_group_divides(spec);
    const std::vector<int64_t> shape = read_ints(store.at(spec.module + ".weight_shape"), 2);
    check(shape[0] == N && shape[1] == K, "{}.weight_shape is [{}, {}], expected [{}, {}]",
          spec.module, shape[0], shape[1], N, K);
    Projection p;
    const int64_t word_cols = ceil_div(K, pf);
    const TensorInfo& packed = store.at(spec.module + ".weight_packed");
    expect_tensor(packed, {StDType::i32}, {N, word_cols});
    Matrix<uint8_t> codes = unpack_along_cols(packed.bytes, N, word_cols, s.bits);
    p.codes = Matrix<uint8_t>(N, K);
    for (int64_t n = 0; n < N; ++n)
      for (int64_t k = 0; k < K; ++k) p.codes.at(n, k) = codes.at(n, k);
    p.scales = read_floats(store.at(spec.module + ".weight_scale"), N, G);
    if (s.has_zero_points()) {
      const TensorInfo& zp = store.at(spec.module + ".weight_zero_point");
      const int64_t word_rows = ceil_div(N, pf);
      expect_tensor(zp, {StDType::i32}, {word_rows, G});
      Matrix<uint8_t> zeros = unpack_along_rows(zp.bytes, word_rows, G, s.bits);
      zeros.rows = N;
      zeros.values.resize(static_cast<size_t>(N * G));
      p.zeros = std::move(zeros);
    }
    if (s.act_order) {
      for (int64_t g : read_ints(store.at(spec.module + ".weight_g_idx"), K)) {
        check(g >= 0 && g < G, "{}.weight_g_idx: group {} outside 0..{}", spec.module, g, G - 1);
        p.g_idx.push_back(static_cast<int32_t>(g));
      }
    }
    p.bias = read_bias(store, spec);
    return p;
  }

  void write(SafetensorsWriter& out, const ProjectionSpec& spec, const Projection& p,
             const WriteOptions& options) const override {
    const QuantScheme& s = spec.scheme;
    const int64_t N = spec.N, K = spec.K, G = s.groups_for(K);
    const int pf = pack_factor(s.bits);
    check_group_divides(spec);
    out.add<uint32_t>(spec.module + ".weight_packed", StDType::i32, {N, ceil_div(K, pf)},
                      pack_along_cols(p.codes, s.bits));
    add_floats(out, spec.module + ".weight_scale", {N, G}, p.scales.values, options);
    if (s.has_zero_points()) {
      out.add<uint32_t>(spec.module + ".weight_zero_point", StDType::i32, {ceil_div(N, pf), G},
                        pack_along_rows(p.zeros, s.bits));
    }
    if (s.act_order) {
      out.add<int32_t>(spec.module + ".weight_g_idx", StDType::i32, {K}, p.g_idx);
    }
    const std::vector<int64_t> shape{N, K};
    out.add<int64_t>(spec.module + ".weight_shape", StDType::i64, {2}, shape);
    add_bias(out, spec, p, options);
  }

  ordered_json quantization_config(const QuantScheme& s, const WriteOptions&) const override {
    ordered_json weights = {{"num_bits", s.bits},
                            {"type", "int"},
                            {"symmetric", !s.has_zero_points()},
                            {"dynamic", false}};
    if (s.group_size == kChannelwise) {
      weights["strategy"] = "channel";
      weights["group_size"] = nullptr;
    } else {
      weights["strategy"] = "group";
      weights["group_size"] = s.group_size;
    }
    weights["actorder"] = s.act_order ? ordered_json("group") : ordered_json(nullptr);
    ordered_json group = {{"targets", {"Linear"}},
                          {"weights", weights},
                          {"input_activations", nullptr},
                          {"output_activations", nullptr},
                          {"format", "pack-quantized"}};
    return {{"quant_method", "compressed-tensors"},
            {"format", "pack-quantized"},
            {"quantization_status", "compressed"},
            {"config_groups", {{"group_0", group}}},
            {"ignore", {"lm_head", "re:.*mlp.gate$", "re:.*block_sparse_moe.gate$"}}};
  }
};

}  // namespace

const FormatAdapter& compressed_tensors_adapter() {
  static const CompressedTensorsAdapter adapter;
  return adapter;
}

}  // namespace qmoe::format
