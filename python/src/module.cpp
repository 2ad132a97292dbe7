#include <nanobind/nanobind.h>

#include "bindings.hpp"
#include "qmoe/error.hpp"
#include "qmoe/threads.hpp"

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
  m.def("usable_cpus", &qmoe::usable_cpus,
        "The cores this process may run on: its CPU affinity mask, bounded by its cgroup CPU "
        "quota rounded up.");
  m.def("cpu_threads", &qmoe::cpu_threads,
        "Threads the cpu backend runs forwards on: QMOE_CPU_THREADS when set, else usable_cpus(). "
        "One pool per process, shared by every layer and calling thread.");
  m.def("set_cpu_threads", &qmoe::set_cpu_threads, nanobind::arg("threads"),
        "Sets the cpu backend's thread count (1..1024) for every later forward.");
  qmoe::python::bind_types(m);
  qmoe::python::bind_experts(m);
  qmoe::python::bind_moe(m);
  qmoe::python::bind_layouts(m);
  qmoe::python::bind_bench(m);
  qmoe::python::bind_dist(m);
}
