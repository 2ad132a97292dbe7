#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/string_view.h>
#include <nanobind/stl/vector.h>

#include <cstdint>

#include "bindings.hpp"
#include "qmoe/device.hpp"
#include "qmoe/error.hpp"
#include "qmoe/moe.hpp"
#include "tensor_args.hpp"

namespace nb = nanobind;

namespace qmoe::python {

namespace {

void* as_stream(uintptr_t stream) { return reinterpret_cast<void*>(stream); }

// The device the layer runs on: "cpu", "cuda" or "cuda:N" (real devices only).
Device run_device(const std::string& text) {
  const DeviceDesc d = parse_device(text);
  if (d.described)
    throw Error("device '" + text + "' is a described device; a MoE runs on 'cpu' or 'cuda:N'");
  return d.device();
}

// Both calling forms of the forward: DLPack arrays, or tuples (tensor_args.hpp); the GIL is
// released while the layer runs.
template <class In, class Out>
void forward(const MoE& moe, const In& x, const In& logits, const Out& out, uintptr_t stream) {
  const TensorView vx = view_of(x, "x"), vl = view_of(logits, "router_logits"),
                   vo = view_of(out, "out");
  nb::gil_scoped_release release;
  moe.forward(vx, vl, vo, as_stream(stream));
}

template <class In, class Out>
void forward_routed(const MoE& moe, const In& x, const In& weights, const In& ids, const Out& out,
                    uintptr_t stream) {
  const TensorView vx = view_of(x, "x"), vw = view_of(weights, "topk_weights"),
                   vi = view_of(ids, "topk_ids"), vo = view_of(out, "out");
  nb::gil_scoped_release release;
  moe.forward_routed(vx, vw, vi, vo, as_stream(stream));
}

template <class In, class Out>
void forward_batched(const MoE& moe, const In& x, const In& counts, const Out& out,
                     uintptr_t stream) {
  const TensorView vx = view_of(x, "x", 3), vc = view_of(counts, "counts", 1),
                   vo = view_of(out, "out", 3);
  nb::gil_scoped_release release;
  moe.forward_batched(vx, vc, vo, as_stream(stream));
}

}  // namespace

void bind_moe(nb::module_& m) {
  nb::class_<MoE>(m, "MoE", "A MoE layer whose weights live on its device in its backend's form.")
      .def(
          "__init__",
          [](MoE* moe, const MoEConfig& config, const QuantizedExperts& experts,
             const std::string& backend, const std::string& device) {
            new (moe) MoE(config, experts, backend, run_device(device));
          },
          nb::arg("config"), nb::arg("experts"), nb::arg("backend") = "auto",
          nb::arg("device") = "cpu")
      .def_prop_ro("config", &MoE::config)
      .def_prop_ro("backend", [](const MoE& moe) { return std::string(moe.backend_name()); })
      .def_prop_ro("selection", &MoE::selection)
      .def(
          "reserve",
          [](const MoE& moe, int64_t max_tokens, uintptr_t stream) {
            moe.reserve(max_tokens, as_stream(stream));
          },
          nb::arg("max_tokens"), nb::arg("stream") = 0)
      .def("forward", &forward<nb::ndarray<nb::ro>, nb::ndarray<>>, nb::arg("x"),
           nb::arg("router_logits"), nb::arg("out"), nb::arg("stream") = 0)
      .def("forward_routed", &forward_routed<nb::ndarray<nb::ro>, nb::ndarray<>>, nb::arg("x"),
           nb::arg("topk_weights"), nb::arg("topk_ids"), nb::arg("out"), nb::arg("stream") = 0)
      .def("forward_described", &forward<nb::tuple, nb::tuple>, nb::arg("x"),
           nb::arg("router_logits"), nb::arg("out"), nb::arg("stream") = 0)
      .def("forward_routed_described", &forward_routed<nb::tuple, nb::tuple>, nb::arg("x"),
           nb::arg("topk_weights"), nb::arg("topk_ids"), nb::arg("out"), nb::arg("stream") = 0)
      .def("forward_batched", &forward_batched<nb::ndarray<nb::ro>, nb::ndarray<>>, nb::arg("x"),
           nb::arg("counts"), nb::arg("out"), nb::arg("stream") = 0)
      .def("forward_batched_described", &forward_batched<nb::tuple, nb::tuple>, nb::arg("x"),
           nb::arg("counts"), nb::arg("out"), nb::arg("stream") = 0);
}

}  // namespace qmoe::python
