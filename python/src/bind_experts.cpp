#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/filesystem.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/string_view.h>
#include <nanobind/stl/vector.h>

#include <cstring>
#include <optional>

#include "backend/emulation/dense_forward.hpp"
#include "bindings.hpp"
#include "core/check.hpp"
#include "format/inspect.hpp"
#include "qmoe/checkpoint.hpp"
#include "qmoe/quant.hpp"
#include "sample/random_moe.hpp"
#include "tensor_args.hpp"

namespace nb = nanobind;

namespace qmoe::python {

namespace {

using Array = nb::ndarray<nb::numpy>;

// A NumPy array that owns a copy of `b` (weights are read once; a copy keeps lifetimes simple).
Array to_numpy(const Buffer& b) {
  if (b.empty()) return Array();
  auto* copy = new std::byte[size_t(b.nbytes())];
  std::memcpy(copy, b.data(), size_t(b.nbytes()));
  nb::capsule owner(copy, [](void* p) noexcept { delete[] static_cast<std::byte*>(p); });
  std::vector<size_t> shape(b.shape().begin(), b.shape().end());
  nb::dlpack::dtype dt;
  switch (b.dtype()) {
    case DType::f32: dt = nb::dtype<float>(); break;
    case DType::i32: dt = nb::dtype<int32_t>(); break;
    case DType::u8: dt = nb::dtype<uint8_t>(); break;
    default: fail("no NumPy view for {}", name(b.dtype()));
  }
  return Array(copy, shape.size(), shape.data(), owner, nullptr, dt);
}

// A host array's bytes copied into a Buffer of `dtype`, shape as given; `what` names it in errors.
Buffer from_array(const nb::ndarray<nb::ro>& a, DType dtype, const char* what) {
  check(a.device_type() == nb::device::cpu::value, "{} must be a CPU array", what);
  std::vector<int64_t> shape;
  for (size_t i = 0; i < a.ndim(); ++i) shape.push_back(int64_t(a.shape(i)));
  Buffer b(dtype, shape);
  int64_t expected_stride = 1;
  for (size_t i = a.ndim(); i-- > 0;) {
    check(a.shape(i) == 1 || a.stride(i) == expected_stride, "{} must be contiguous", what);
    expected_stride *= int64_t(a.shape(i));
  }
  check(int64_t(a.itemsize()) == size_of(dtype), "{} must hold {} elements ({} bytes), got {}",
        what, name(dtype), size_of(dtype), a.itemsize());
  std::memcpy(b.data(), a.data(), size_t(b.nbytes()));
  return b;
}

QuantizedWeight make_weight(const QuantScheme& scheme, const nb::ndarray<nb::ro>& codes,
                            const nb::ndarray<nb::ro>& scales,
                            std::optional<nb::ndarray<nb::ro>> zeros,
                            std::optional<nb::ndarray<nb::ro>> g_idx,
                            std::optional<nb::ndarray<nb::ro>> bias, int64_t K_full) {
  check(codes.ndim() == 3, "codes must be [E, N, K / (8 / bits)], got {} dimensions", codes.ndim());
  QuantizedWeight w;
  w.scheme = scheme;
  w.E = int64_t(codes.shape(0));
  w.N = int64_t(codes.shape(1));
  w.K = int64_t(codes.shape(2)) * (scheme.bits == 4 ? 2 : 1);
  w.K_full = K_full;
  w.codes = from_array(codes, DType::u8, "codes");
  w.scales =
      from_array(scales, scheme.kind == WeightKind::mxfp4 ? DType::u8 : DType::f32, "scales");
  if (zeros) w.zeros = from_array(*zeros, DType::u8, "zeros");
  if (g_idx) w.g_idx = from_array(*g_idx, DType::i32, "g_idx");
  if (bias) w.bias = from_array(*bias, DType::f32, "bias");
  w.validate("weight");
  return w;
}

void bind_weights(nb::module_& m) {
  nb::class_<QuantizedWeight>(m, "QuantizedWeight",
                              "One stacked expert weight in qmoe's canonical form, [E, N, K].")
      .def(
          "__init__",
          [](QuantizedWeight* w, const QuantScheme& scheme, const nb::ndarray<nb::ro>& codes,
             const nb::ndarray<nb::ro>& scales, std::optional<nb::ndarray<nb::ro>> zeros,
             std::optional<nb::ndarray<nb::ro>> g_idx, std::optional<nb::ndarray<nb::ro>> bias,
             int64_t K_full) {
            new (w) QuantizedWeight(make_weight(scheme, codes, scales, zeros, g_idx, bias, K_full));
          },
          nb::arg("scheme"), nb::arg("codes"), nb::arg("scales"), nb::arg("zeros") = nb::none(),
          nb::arg("g_idx") = nb::none(), nb::arg("bias") = nb::none(), nb::arg("K_full") = 0,
          "codes u8 [E, N, K/2] (int4, low nibble = even k) or [E, N, K] (int8); scales f32 "
          "[E, N, K/G]; zeros u8 [E, N, K/G]; g_idx i32 [E, K]; bias f32 [E, N]. Copied.")
      .def_ro("scheme", &QuantizedWeight::scheme)
      .def_ro("E", &QuantizedWeight::E)
      .def_ro("N", &QuantizedWeight::N)
      .def_ro("K", &QuantizedWeight::K)
      .def_prop_ro("has_bias", &QuantizedWeight::has_bias)
      .def_prop_ro(
          "codes", [](const QuantizedWeight& w) { return to_numpy(w.codes); }, nb::rv_policy::move)
      .def_prop_ro(
          "scales", [](const QuantizedWeight& w) { return to_numpy(w.scales); },
          nb::rv_policy::move)
      .def_prop_ro(
          "zeros", [](const QuantizedWeight& w) { return to_numpy(w.zeros); }, nb::rv_policy::move)
      .def_prop_ro(
          "g_idx", [](const QuantizedWeight& w) { return to_numpy(w.g_idx); }, nb::rv_policy::move)
      .def_prop_ro(
          "bias", [](const QuantizedWeight& w) { return to_numpy(w.bias); }, nb::rv_policy::move)
      .def(
          "dequantize", [](const QuantizedWeight& w) { return to_numpy(dequantize_weight(w)); },
          "The weight as float32 [E, N, K]: (code - zero) * scale.");
  nb::class_<QuantizedExperts>(m, "QuantizedExperts",
                               "A layer's experts: w13 [E, 2I, H] (gate rows, then up rows) and "
                               "w2 [E, H, I].")
      .def(
          "__init__",
          [](QuantizedExperts* x, const QuantizedWeight& w13, const QuantizedWeight& w2) {
            new (x) QuantizedExperts(w13.clone(), w2.clone());
          },
          nb::arg("w13"), nb::arg("w2"))
      .def_prop_ro("w13", &QuantizedExperts::w13, nb::rv_policy::reference_internal)
      .def_prop_ro("w2", &QuantizedExperts::w2, nb::rv_policy::reference_internal)
      .def_prop_ro("num_experts", &QuantizedExperts::num_experts)
      .def_prop_ro("hidden", &QuantizedExperts::hidden)
      .def_prop_ro("intermediate", &QuantizedExperts::intermediate);
  m.def(
      "random_experts",
      [](const MoEConfig& config, const QuantScheme& scheme, uint64_t seed) {
        std::mt19937_64 rng(seed);
        return QuantizedExperts(
            sample::random_weight(config.num_experts, config.w13_rows(), config.hidden, scheme,
                                  config.w13_bias, rng),
            sample::random_weight(config.num_experts, config.hidden, config.intermediate, scheme,
                                  config.w2_bias, rng));
      },
      nb::arg("config"), nb::arg("scheme"), nb::arg("seed") = 0,
      "Random experts for a config: float weights ~ N(0, 1/K) quantized with the reference "
      "round-to-nearest quantizer (for examples, tests and benchmarks).");
}

void bind_checkpoint(nb::module_& m) {
  nb::class_<Checkpoint>(m, "Checkpoint",
                         "A model directory (config.json + safetensors) with quantized experts.")
      .def(
          "__init__",
          [](Checkpoint* c, const std::filesystem::path& dir, bool as_moe_wna16) {
            new (c) Checkpoint(Checkpoint::open(dir, OpenOptions{.as_moe_wna16 = as_moe_wna16}));
          },
          nb::arg("path"), nb::arg("as_moe_wna16") = false)
      .def_prop_ro("path", &Checkpoint::dir)
      .def_prop_ro("format", [](const Checkpoint& c) { return std::string(c.format()); })
      .def_prop_ro("model_type", [](const Checkpoint& c) { return std::string(c.model_type()); })
      .def_prop_ro("scheme", &Checkpoint::scheme)
      .def_prop_ro("config", &Checkpoint::moe_config)
      .def_prop_ro("layers", &Checkpoint::moe_layers, "Layers that hold quantized experts.")
      .def("layer_config", &Checkpoint::layer_config, nb::arg("layer"))
      .def("layer_bytes", &Checkpoint::layer_bytes, nb::arg("layer"))
      .def("load_layer", &Checkpoint::load_layer, nb::arg("layer"),
           "The layer's experts in canonical form.")
      .def(
          "_inspect_json",
          [](const Checkpoint& c) { return format::to_json(format::inspect(c)).dump(); },
          "The `qmoe inspect --json` report as a JSON string.");
}

}  // namespace

void bind_experts(nb::module_& m) {
  bind_weights(m);
  bind_checkpoint(m);
}

}  // namespace qmoe::python
