#include <nanobind/nanobind.h>

#include "bindings.hpp"
#include "qmoe/error.hpp"

NB_MODULE(_qmoe, m) {
  m.doc() = "qmoe's C++ core; use the package qmoe, which wraps it.";
  nanobind::exception<qmoe::Error>(m, "Error", PyExc_ValueError);
  m.def("built_with_cuda", [] {
#ifdef QMOE_WITH_CUDA
    return true;
#else
    return false;
#endif
  });
  qmoe::python::bind_types(m);
  qmoe::python::bind_experts(m);
  qmoe::python::bind_moe(m);
  qmoe::python::bind_layouts(m);
  qmoe::python::bind_bench(m);
}
