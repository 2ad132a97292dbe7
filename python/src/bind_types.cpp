#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/string_view.h>
#include <nanobind/stl/vector.h>

#include "bindings.hpp"
#include "qmoe/config.hpp"
#include "qmoe/device.hpp"
#include "qmoe/oracle.hpp"
#include "qmoe/quant.hpp"

namespace nb = nanobind;

namespace qmoe::python {

namespace {

void bind_enums(nb::module_& m) {
  nb::enum_<DType>(m, "DType")
      .value("f64", DType::f64)
      .value("f32", DType::f32)
      .value("f16", DType::f16)
      .value("bf16", DType::bf16)
      .value("i64", DType::i64)
      .value("i32", DType::i32)
      .value("i16", DType::i16)
      .value("i8", DType::i8)
      .value("u8", DType::u8)
      .value("u16", DType::u16)
      .value("u32", DType::u32);
  nb::enum_<Activation> activation(m, "Activation");
  for (Activation a : all_activations()) activation.value(std::string(name(a)).c_str(), a);
  nb::enum_<Scoring>(m, "Scoring")
      .value("softmax", Scoring::softmax)
      .value("sigmoid", Scoring::sigmoid);
  nb::enum_<WeightKind>(m, "WeightKind")
      .value("integer", WeightKind::integer)
      .value("mxfp4", WeightKind::mxfp4);
  nb::enum_<ActivationQuant>(m, "ActivationQuant",
                             "Activations entering each GEMM: kept (none), or quantized to MXFP4 "
                             "with OCP floor scales (mxfp4) or Quark's even scales (mxfp4_even).")
      .value("none", ActivationQuant::none)
      .value("mxfp4", ActivationQuant::mxfp4)
      .value("mxfp4_even", ActivationQuant::mxfp4_even);
}

void bind_scheme(nb::module_& m) {
  nb::class_<QuantScheme>(m, "QuantScheme",
                          "How expert weights are quantized; group_size -1 = channelwise.")
      .def(
          "__init__",
          [](QuantScheme* s, int bits, int group_size, bool zero_points, bool act_order,
             WeightKind kind, ActivationQuant activation_quant) {
            new (s) QuantScheme{.kind = kind,
                                .bits = bits,
                                .zero_point = zero_points ? ZeroPoint::explicit_ : ZeroPoint::none,
                                .group_size = group_size,
                                .act_order = act_order,
                                .activation_quant = activation_quant};
            validate(*s);
          },
          nb::arg("bits") = 4, nb::arg("group_size") = 128, nb::arg("zero_points") = false,
          nb::arg("act_order") = false, nb::arg("kind") = WeightKind::integer,
          nb::arg("activation_quant") = ActivationQuant::none)
      .def_rw("kind", &QuantScheme::kind)
      .def_rw("activation_quant", &QuantScheme::activation_quant)
      .def_rw("bits", &QuantScheme::bits)
      .def_rw("group_size", &QuantScheme::group_size)
      .def_rw("act_order", &QuantScheme::act_order)
      .def_prop_rw(
          "zero_points", [](const QuantScheme& s) { return s.has_zero_points(); },
          [](QuantScheme& s, bool z) { s.zero_point = z ? ZeroPoint::explicit_ : ZeroPoint::none; })
      .def("__eq__", [](const QuantScheme& a, const QuantScheme& b) { return a == b; })
      .def("__repr__", [](const QuantScheme& s) { return "QuantScheme(" + to_string(s) + ")"; })
      .def("__str__", [](const QuantScheme& s) { return to_string(s); });
}

void bind_config(nb::module_& m) {
  nb::class_<RoutingConfig>(m, "RoutingConfig")
      .def(nb::init<>())
      .def_rw("scoring", &RoutingConfig::scoring)
      .def_rw("top_k", &RoutingConfig::top_k)
      .def_rw("renormalize", &RoutingConfig::renormalize)
      .def_rw("routed_scaling_factor", &RoutingConfig::routed_scaling_factor)
      .def_rw("n_group", &RoutingConfig::n_group)
      .def_rw("topk_group", &RoutingConfig::topk_group)
      .def_rw("correction_bias", &RoutingConfig::correction_bias);
  nb::class_<MoEConfig>(m, "MoEConfig", "One MoE layer's shape, routing and activation.")
      .def(
          "__init__",
          [](MoEConfig* c, int64_t num_experts, int64_t hidden, int64_t intermediate, int top_k,
             Activation activation, bool renormalize, Scoring scoring) {
            new (c) MoEConfig{};
            c->num_experts = num_experts;
            c->hidden = hidden;
            c->intermediate = intermediate;
            c->routing.top_k = top_k;
            c->routing.renormalize = renormalize;
            c->routing.scoring = scoring;
            c->activation = activation;
          },
          nb::arg("num_experts"), nb::arg("hidden"), nb::arg("intermediate"), nb::arg("top_k"),
          nb::arg("activation") = Activation::silu, nb::arg("renormalize") = true,
          nb::arg("scoring") = Scoring::softmax)
      .def_rw("num_experts", &MoEConfig::num_experts)
      .def_rw("hidden", &MoEConfig::hidden)
      .def_rw("intermediate", &MoEConfig::intermediate)
      .def_rw("routing", &MoEConfig::routing)
      .def_rw("activation", &MoEConfig::activation)
      .def_rw("w13_bias", &MoEConfig::w13_bias)
      .def_rw("w2_bias", &MoEConfig::w2_bias)
      .def_rw("apply_router_weight_on_input", &MoEConfig::apply_router_weight_on_input)
      .def_prop_ro("top_k", &MoEConfig::top_k)
      .def("validate", [](const MoEConfig& c) { validate(c); })
      .def("__repr__", [](const MoEConfig& c) {
        return "MoEConfig(num_experts=" + std::to_string(c.num_experts) +
               ", hidden=" + std::to_string(c.hidden) +
               ", intermediate=" + std::to_string(c.intermediate) +
               ", top_k=" + std::to_string(c.top_k()) +
               ", activation=" + std::string(name(c.activation)) + ")";
      });
}

void bind_selection(nb::module_& m) {
  nb::class_<Verdict>(m, "Verdict", "The oracle's verdict on one backend.")
      .def_ro("backend", &Verdict::backend)
      .def_ro("summary", &Verdict::summary)
      .def_ro("chosen", &Verdict::chosen)
      .def_ro("compatible", &Verdict::compatible)
      .def_ro("reason", &Verdict::reason)
      .def("__repr__", [](const Verdict& v) {
        return "Verdict(" + v.backend + ", " +
               (v.chosen ? std::string("chosen") : "rejected: " + v.reason) + ")";
      });
  nb::class_<PlanStep>(m, "PlanStep",
                       "One backend of a two-kernel plan and the batches it runs: from "
                       "`from_tokens` tokens up to the next step's.")
      .def_ro("backend", &PlanStep::backend)
      .def_ro("from_tokens", &PlanStep::from_tokens)
      .def_ro("why", &PlanStep::why)
      .def_ro("weight_bytes", &PlanStep::weight_bytes,
              "What a large-batch step adds to the first step's weights, in bytes; 0 for the "
              "first step")
      .def_ro("shared_bytes", &PlanStep::shared_bytes,
              "The first step's int4 codes this step reads instead of a copy of its own, in bytes")
      .def("__repr__", [](const PlanStep& p) {
        return "PlanStep(" + p.backend + ", from_tokens=" + std::to_string(p.from_tokens) + ")";
      });
  nb::class_<Selection>(m, "Selection", "Which backend runs a layer, and every backend's verdict.")
      .def_ro("backend", &Selection::backend)
      .def_ro("verdicts", &Selection::verdicts)
      .def_ro("plan", &Selection::plan,
              "On sm_90: the small-batch backend, then the large-batch one from its crossover "
              "(per call); empty when one backend runs every batch")
      .def_ro("error", &Selection::error)
      .def_ro("weight_bytes", &Selection::weight_bytes,
              "The chosen backend's prepared copy of the layer's weights, in bytes (0 where it "
              "does not declare them)")
      .def_prop_ro("default_weight_bytes", &default_weight_bytes,
                   "The layer's weight bytes as a MoE prepares them by default: the chosen "
                   "backend's, plus what the plan's large-batch step adds when that is prepared "
                   "unasked")
      .def("__repr__", [](const Selection& s) {
        return "Selection(backend=" + (s.backend.empty() ? "None, error=" + s.error : s.backend) +
               ")";
      });
  m.def(
      "explain",
      [](const QuantScheme& scheme, const MoEConfig& config, const std::string& device,
         const std::string& backend) {
        return evaluate(describe(scheme, config), parse_device(device), backend);
      },
      nb::arg("scheme"), nb::arg("config"), nb::arg("device") = "cpu", nb::arg("backend") = "auto",
      "The oracle's verdicts for a layer of this scheme and config on `device` (a real device "
      "such as 'cpu' or 'cuda:0', or a described one such as 'sm_90' or 'h100').");
  m.def("known_backends", &known_backends);
}

}  // namespace

void bind_types(nb::module_& m) {
  bind_enums(m);
  bind_scheme(m);
  bind_config(m);
  bind_selection(m);
}

}  // namespace qmoe::python
