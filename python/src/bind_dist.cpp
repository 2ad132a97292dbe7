// What qmoe.distributed needs of the C++ sharding: the plan, one rank's slice of a layer (cut from
// its experts or read from a checkpoint), and the whole layer's routing as one rank sees it. The
// collectives are the torch.distributed group's, in Python.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cstring>

#include "bindings.hpp"
#include "core/check.hpp"
#include "qmoe/distributed.hpp"
#include "qmoe/shard.hpp"
#include "route/routing_contract.hpp"
#include "route/topk.hpp"
#include "tensor_args.hpp"

namespace nb = nanobind;

namespace qmoe::python {

namespace {

// A contiguous host array of `dtype` and shape [rows, cols]; `what` names it in errors.
TensorView host_matrix(const TensorView& v, DType dtype, int64_t rows, int64_t cols,
                       const char* what) {
  check(v.device().kind == DeviceKind::cpu && v.dtype() == dtype && v.is_contiguous() &&
            v.dim(0) == rows && v.dim(1) == cols,
        "{} is {}, expected a contiguous host {}[{}, {}]", what, v.describe(), name(dtype), rows,
        cols);
  return v;
}

// plan_shards from what describes the layer: its experts, or a scheme and config (a checkpoint's
// metadata, before any weight is read).
template <class Layer>
void def_plan_shards(nb::module_& m, const char* layer_name) {
  m.def(
      "plan_shards",
      [](const Layer& layer, const MoEConfig& config, int tp_size, int ep_size, int word_bits) {
        return plan_shards(
            describe(layer, config),
            ShardSpec{.tp_size = tp_size, .ep_size = ep_size, .word_bits = word_bits});
      },
      nb::arg(layer_name), nb::arg("config"), nb::arg("tp_size"), nb::arg("ep_size"),
      nb::arg("word_bits") = ShardSpec{}.word_bits,
      "Splits a layer over tp_size x ep_size ranks, or raises Error naming the rule it breaks and "
      "the sizes that work. word_bits: the packed word a TP slice must not cut (32: checkpoint "
      "words, 8: qmoe's canonical bytes).");
}

void bind_plan(nb::module_& m) {
  nb::class_<RankShard>(m, "RankShard", "One rank's part of a ShardPlan.")
      .def_ro("rank", &RankShard::rank)
      .def_ro("tp_rank", &RankShard::tp_rank)
      .def_ro("ep_rank", &RankShard::ep_rank)
      .def_ro("first_expert", &RankShard::first_expert)
      .def_ro("num_experts", &RankShard::num_experts)
      .def_ro("first_channel", &RankShard::first_channel)
      .def_ro("intermediate", &RankShard::intermediate)
      .def_ro("w2_bias", &RankShard::w2_bias, "Whether this rank adds w2's bias (tp_rank 0)")
      .def("__repr__", [](const RankShard& r) {
        return "RankShard(rank=" + std::to_string(r.rank) + ", experts " +
               std::to_string(r.first_expert) + ".." +
               std::to_string(r.first_expert + r.num_experts - 1) + ", channels " +
               std::to_string(r.first_channel) + ".." +
               std::to_string(r.first_channel + r.intermediate - 1) + ")";
      });
  nb::class_<ShardPlan>(m, "ShardPlan",
                        "A layer split over tp_size x ep_size ranks; rank = ep_rank * tp_size + "
                        "tp_rank.")
      .def_prop_ro("tp_size", [](const ShardPlan& p) { return p.spec.tp_size; })
      .def_prop_ro("ep_size", [](const ShardPlan& p) { return p.spec.ep_size; })
      .def_prop_ro("word_bits", [](const ShardPlan& p) { return p.spec.word_bits; })
      .def_prop_ro("world_size", &ShardPlan::world_size)
      .def_prop_ro("layer", [](const ShardPlan& p) { return p.layer.to_string(); })
      .def_ro("ranks", &ShardPlan::ranks)
      .def("expert_map", &ShardPlan::expert_map, nb::arg("rank"),
           "[E] global expert id -> the rank's local id, -1 where another rank holds it")
      .def("__repr__", [](const ShardPlan& p) {
        return "ShardPlan(tp_size=" + std::to_string(p.spec.tp_size) +
               ", ep_size=" + std::to_string(p.spec.ep_size) + ", " + p.layer.to_string() + ")";
      });
  def_plan_shards<QuantizedExperts>(m, "experts");
  def_plan_shards<QuantScheme>(m, "scheme");
}

void bind_slices(nb::module_& m) {
  m.def("shard_experts", &shard_experts, nb::arg("experts"), nb::arg("plan"), nb::arg("rank"),
        "The rank's slice of the whole layer's experts, an ordinary layer for any backend.");
  m.def("shard_config", &shard_config, nb::arg("config"), nb::arg("plan"), nb::arg("rank"),
        "The rank's slice's config: its experts and channels, top-k without grouping (routing is "
        "done for the whole layer).");
  m.def("load_shard", &load_shard, nb::arg("checkpoint"), nb::arg("layer"), nb::arg("plan"),
        nb::arg("rank"),
        "The rank's slice of a checkpoint's layer, reading only the rank's experts.");
}

void bind_routing(nb::module_& m) {
  m.def(
      "route_topk",
      [](const MoEConfig& config, const nb::ndarray<nb::ro>& logits,
         const nb::ndarray<>& topk_weights, const nb::ndarray<>& topk_ids) {
        validate(config);
        const TensorView vl = view_of(logits, "router_logits");
        const int64_t M = vl.dim(0), E = config.num_experts, k = config.top_k();
        host_matrix(vl, DType::f32, M, E, "router_logits");
        const TensorView vw =
            host_matrix(view_of(topk_weights, "topk_weights"), DType::f32, M, k, "topk_weights");
        const TensorView vi =
            host_matrix(view_of(topk_ids, "topk_ids"), DType::i32, M, k, "topk_ids");
        check_router_logits(vl.data_as<const float>(), M, E);
        route_topk(config.routing, vl.data_as<const float>(), M, E, vw.data_as<float>(),
                   vi.data_as<int32_t>());
      },
      nb::arg("config"), nb::arg("router_logits"), nb::arg("topk_weights"), nb::arg("topk_ids"),
      "The layer's routing of host router_logits f32 [M, E] into topk_weights f32 [M, k] and "
      "topk_ids i32 [M, k] (the reference router every CPU backend uses).");
  m.def(
      "localize_routing",
      [](const ShardPlan& plan, int rank, const nb::ndarray<>& topk_weights,
         const nb::ndarray<>& topk_ids) {
        const TensorView vw = view_of(topk_weights, "topk_weights"),
                         vi = view_of(topk_ids, "topk_ids");
        const LocalRouting local = localize_routing(plan, rank, vw, vi);
        std::memcpy(vw.data(), local.topk_weights.data(), size_t(local.topk_weights.nbytes()));
        std::memcpy(vi.data(), local.topk_ids.data(), size_t(local.topk_ids.nbytes()));
      },
      nb::arg("plan"), nb::arg("rank"), nb::arg("topk_weights"), nb::arg("topk_ids"),
      "In place: the whole layer's host routing becomes the rank's (local ids; id 0 and weight 0 "
      "where another rank holds the expert).");
}

}  // namespace

void bind_dist(nb::module_& m) {
  bind_plan(m);
  bind_slices(m);
  bind_routing(m);
}

}  // namespace qmoe::python
