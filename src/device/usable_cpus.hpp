#pragma once
// The parts of usable_cpus() (qmoe/threads.hpp) that read cgroup files, testable on strings.
#include <string_view>

namespace qmoe::device {

// CPUs granted by a cgroup v2 `cpu.max` ("QUOTA PERIOD", or "max PERIOD" for no limit), or by
// cgroup v1's `cpu.cfs_quota_us` and `cpu.cfs_period_us` (quota -1: no limit). 0 when there is
// no limit or the text is not understood: an unreadable limit must not shrink the pool.
double cpu_max_limit(std::string_view cpu_max);
double cfs_quota_limit(std::string_view quota_us, std::string_view period_us);

// The cores a limit of `cpus` allows (rounded up, at least 1), never more than `affinity`;
// `affinity` alone when cpus is 0.
int cores_within(int affinity, double cpus);

}  // namespace qmoe::device
