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

Projection FormatAdapter::read(const TensorStore& store, const ProjectionSpec& spec) const {
  return decode(store.read_parts(parts(store, spec)), spec);
}

Range ProjectionSpec::groups() const {
  const int64_t G = scheme.groups_for(K);
  if (scheme.act_order || scheme.group_size == kChannelwise) return {0, G};
  const int64_t size = scheme.group_size;
  const Range k = cols();
  check(k.first % size == 0 && k.count % size == 0,
        "{}: input channels [{}, {}) cut a quantization group of {} (valid: multiples of {})",
        module, k.first, k.end(), size, size);
  return {k.first / size, k.count / size};
}

void ProjectionSpec::check_cut(int64_t out_multiple, int64_t in_multiple, const char* why) const {
  const auto fits = [](Range r, int64_t all, int64_t multiple) {
    return r.first >= 0 && r.count >= 1 && r.first <= all && r.count <= all - r.first &&
           r.first % multiple == 0 && (r.count % multiple == 0 || r.end() == all);
  };
  const Range n = rows(), k = cols();
  check(
      fits(n, N, out_multiple) && fits(k, K, in_multiple),
      "{}: cannot read output channels [{}, {}) x input channels [{}, {}) of [{}, {}]: {} (valid: "
      "output channels in multiples of {}, input channels in multiples of {}, within the "
      "projection)",
      module, n.first, n.end(), k.first, k.end(), N, K, why, out_multiple, in_multiple);
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

void add_bias_part(std::vector<TensorPart>& parts, const TensorStore& store,
                   const ProjectionSpec& spec) {
  const std::string name = spec.module + ".bias";
  if (spec.bias && store.find(name))
    parts.push_back(span_part(name, kFloatDTypes, spec.N, spec.rows()));
}

std::vector<float> read_bias(const TensorStore& parts, const ProjectionSpec& spec) {
  const TensorInfo* t = parts.find(spec.module + ".bias");
  if (!t) return {};
  return read_floats(*t, spec.rows().count);
}

}  // namespace qmoe::format
