// Experts from the tensors of a GPTQ, AWQ, compressed-tensors or Quark layer that an engine already
// holds, read by the same format adapters as checkpoints (src/format/adapter.hpp).
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/string.h>

#include <map>
#include <string>
#include <vector>

#include "bindings.hpp"
#include "core/check.hpp"
#include "format/adapter.hpp"
#include "format/projection.hpp"
#include "format/safetensors.hpp"
#include "qmoe/checkpoint.hpp"

namespace nb = nanobind;

namespace qmoe::python {

namespace {

format::StDType st_dtype_of(nb::dlpack::dtype t, const std::string& what) {
  using Code = nb::dlpack::dtype_code;
  const auto code = static_cast<Code>(t.code);
  if (t.lanes == 1) {
    if (code == Code::Int && t.bits == 32) return format::StDType::i32;
    if (code == Code::Int && t.bits == 64) return format::StDType::i64;
    if (code == Code::UInt && t.bits == 8) return format::StDType::u8;
    if (code == Code::Float && t.bits == 16) return format::StDType::f16;
    if (code == Code::Bfloat && t.bits == 16) return format::StDType::bf16;
    if (code == Code::Float && t.bits == 32) return format::StDType::f32;
  }
  fail("tensor '{}': element type (DLPack code {}, {} bits) is not one a checkpoint layout uses",
       what, int(t.code), int(t.bits));
}

format::TensorInfo info_of(const std::string& name, const nb::ndarray<nb::ro>& a) {
  check(a.device_type() == nb::device::cpu::value, "tensor '{}' must be on the CPU", name);
  format::TensorInfo t;
  t.name = name;
  t.file = "(arrays)";
  t.dtype = st_dtype_of(a.dtype(), name);
  int64_t stride = 1;
  for (size_t i = a.ndim(); i-- > 0;) {
    check(a.shape(i) == 1 || a.stride(i) == stride, "tensor '{}' must be contiguous", name);
    stride *= int64_t(a.shape(i));
  }
  for (size_t i = 0; i < a.ndim(); ++i) t.shape.push_back(int64_t(a.shape(i)));
  t.bytes = {static_cast<const std::byte*>(a.data()), a.nbytes()};
  return t;
}

// experts[e] lists the projections whose rows stack into expert e (gate then up for w13).
QuantizedWeight stack(const std::vector<std::vector<format::Projection>>& experts,
                      const QuantScheme& scheme, const std::string& what) {
  const std::vector<format::Projection>& first = experts.front();
  int64_t N = 0;
  for (const format::Projection& p : first) N += p.N();
  QuantizedWeight w = format::allocate_stacked(int64_t(experts.size()), N, first.front().K(),
                                               scheme, !first.front().bias.empty());
  for (size_t e = 0; e < experts.size(); ++e) {
    int64_t row0 = 0;
    for (size_t part = 0; part < experts[e].size(); ++part) {
      format::put_projection(w, int64_t(e), row0, int(part), experts[e][part], what);
      row0 += experts[e][part].N();
    }
  }
  return w;
}

QuantizedExperts experts_from_layout(const std::string& format_name,
                                     const std::map<std::string, nb::ndarray<nb::ro>>& tensors,
                                     const MoEConfig& config, const QuantScheme& scheme,
                                     int gptq_version) {
  const CheckpointFormat fmt = parse_checkpoint_format(format_name);
  check(fmt == CheckpointFormat::gptq || fmt == CheckpointFormat::awq ||
            fmt == CheckpointFormat::compressed_tensors || fmt == CheckpointFormat::quark,
        "experts from tensors: format must be gptq, awq, compressed-tensors or quark, got {}",
        format_name);
  const bool mx_format = fmt == CheckpointFormat::quark;
  check(mx_format == (scheme.kind == WeightKind::mxfp4),
        "experts from tensors: scheme {} does not go with format {} (valid: mxfp4 weights for "
        "quark, integer weights for gptq, awq and compressed-tensors)",
        to_string(scheme), format_name);
  std::vector<format::TensorInfo> infos;
  for (const auto& [name, array] : tensors) infos.push_back(info_of(name, array));
  const format::TensorStore store = format::TensorStore::from_tensors(std::move(infos), "arrays");
  const format::FormatAdapter& adapter = format::adapter_for(fmt);
  const auto E = size_t(config.num_experts);
  std::vector<std::vector<format::Projection>> w13(E), w2(E);
  auto read = [&](size_t e, const char* projection, int64_t N, int64_t K) {
    const format::ProjectionSpec spec{std::to_string(e) + "." + projection, N, K, scheme,
                                      gptq_version};
    return adapter.read(store, spec);
  };
  for (size_t e = 0; e < E; ++e) {
    w13[e].push_back(read(e, "gate_proj", config.intermediate, config.hidden));
    if (is_gated(config.activation))
      w13[e].push_back(read(e, "up_proj", config.intermediate, config.hidden));
    w2[e].push_back(read(e, "down_proj", config.hidden, config.intermediate));
  }
  return QuantizedExperts(stack(w13, scheme, "w13"), stack(w2, scheme, "w2"));
}

}  // namespace

void bind_layouts(nb::module_& m) {
  m.def("experts_from_layout", &experts_from_layout, nb::arg("format"), nb::arg("tensors"),
        nb::arg("config"), nb::arg("scheme"), nb::arg("gptq_version") = 1,
        "Experts from a layer's tensors in a checkpoint format's own layout (gptq, awq, "
        "compressed-tensors, quark), named '{expert}.{gate_proj|up_proj|down_proj}.{tensor}' as "
        "in the format (e.g. '3.gate_proj.qweight', '3.gate_proj.scales', "
        "'3.gate_proj.weight_scale'). Read by the checkpoint reader's adapters; the arrays are "
        "read, not kept.");
}

}  // namespace qmoe::python
