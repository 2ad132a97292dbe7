#include "format/adapter.hpp"

#include <cstring>

#include "core/check.hpp"
#include "format/registry.hpp"
#include "format/tensor_read.hpp"

namespace qmoe::format {

const FormatAdapter& adapter_for(CheckpointFormat stored_format) {
  const FormatEntry& entry = format_entry(stored_format);
  check(entry.adapter != nullptr,
        "{} has no per-expert adapter (moe_wna16 reads GPTQ/AWQ; mxfp4 experts are fused)",
        name(stored_format));
  return entry.adapter();
}

void check_group_divides(const ProjectionSpec& spec) {
  const int64_t G = spec.scheme.group_size_for(spec.K);
  check(spec.K % G == 0, "{}: group size {} does not divide K = {} (valid: a divisor of K, or -1)",
        spec.module, G, spec.K);
}

std::vector<std::byte> encode_floats(std::span<const float> values, StDType dtype,
                                     const std::string& tensor) {
  const int64_t width = size_of(dtype);
  std::vector<std::byte> out(values.size() * static_cast<size_t>(width));
  for (size_t i = 0; i < values.size(); ++i) {
    const float v = values[i];
    float back = v;
    std::byte* dst = out.data() + i * static_cast<size_t>(width);
    if (dtype == StDType::f16) {
      const half_t h = to_half(v);
      back = to_float(h);
      std::memcpy(dst, &h, 2);
    } else if (dtype == StDType::bf16) {
      const bf16_t b = to_bf16(v);
      back = to_float(b);
      std::memcpy(dst, &b, 2);
    } else {
      check(dtype == StDType::f32, "{}: floats are written as F16, BF16 or F32, not {}", tensor,
            name(dtype));
      std::memcpy(dst, &v, 4);
    }
    check(back == v, "{}: element {} = {} is not exactly representable in {} (write with F32)",
          tensor, i, v, name(dtype));
  }
  return out;
}

void add_floats(SafetensorsWriter& out, const std::string& name, std::vector<int64_t> shape,
                std::span<const float> values, const WriteOptions& options) {
  const StDType dtype = to_st_dtype(options.scale_dtype);
  const std::vector<std::byte> bytes = encode_floats(values, dtype, name);
  out.add(name, dtype, std::move(shape), std::span<const std::byte>(bytes));
}

void add_bias(SafetensorsWriter& out, const ProjectionSpec& spec, const Projection& p,
              const WriteOptions& options) {
  if (!p.bias.empty()) add_floats(out, spec.module + ".bias", {spec.N}, p.bias, options);
}

std::vector<float> read_bias(const TensorStore& store, const ProjectionSpec& spec) {
  const TensorInfo* t = store.find(spec.module + ".bias");
  if (!t) return {};
  return read_floats(*t, spec.N);
}

}  // namespace qmoe::format
