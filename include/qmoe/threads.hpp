#pragma once
// How many threads qmoe's host work runs on. The cpu backend runs every forward on one pool per
// process, shared by all layers and all calling threads: forwards called from several threads at
// once take turns on the pool rather than each starting its own threads, so the process never
// runs more forward threads than cpu_threads().
namespace qmoe {

// The cores this process may run on: its CPU affinity mask (taskset, numactl, a container's
// cpuset), bounded by its cgroup CPU quota rounded up (a container limited to 1.5 CPUs gets 2).
// At least 1.
int usable_cpus();

// The cpu backend's thread count: QMOE_CPU_THREADS when set, else usable_cpus().
int cpu_threads();

// Sets the cpu backend's thread count for every later forward, 1..1024 (else throws Error). A
// forward running on another thread finishes on the old threads first.
void set_cpu_threads(int threads);

}  // namespace qmoe
