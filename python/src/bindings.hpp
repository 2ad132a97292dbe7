#pragma once
// One function per group of bindings of the qmoe._qmoe module (module.cpp calls them in order).
#include <nanobind/nanobind.h>

namespace qmoe::python {

void bind_types(nanobind::module_& m);    // enums, QuantScheme, MoEConfig, Selection, explain
void bind_experts(nanobind::module_& m);  // QuantizedWeight, QuantizedExperts, Checkpoint
void bind_moe(nanobind::module_& m);      // MoE
void bind_layouts(nanobind::module_& m);  // experts from GPTQ/AWQ/compressed-tensors tensors
void bind_bench(nanobind::module_& m);    // timings of the C++ call, for bench/python
void bind_dist(nanobind::module_& m);     // shard plans and routing for qmoe.distributed

}  // namespace qmoe::python
