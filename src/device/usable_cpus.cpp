#include "device/usable_cpus.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "qmoe/threads.hpp"

#if defined(__linux__)
#include <sched.h>
#endif

namespace qmoe {

namespace device {

namespace {

bool parse_number(std::string_view text, long long& value) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.remove_suffix(1);
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  return error == std::errc() && end == text.data() + text.size();
}

}  // namespace

double cpu_max_limit(std::string_view cpu_max) {
  const size_t space = cpu_max.find(' ');
  if (space == std::string_view::npos) return 0;
  long long quota = 0, period = 0;
  if (!parse_number(cpu_max.substr(0, space), quota) ||
      !parse_number(cpu_max.substr(space + 1), period) || quota <= 0 || period <= 0)
    return 0;  // "max": no limit
  return static_cast<double>(quota) / static_cast<double>(period);
}

double cfs_quota_limit(std::string_view quota_us, std::string_view period_us) {
  long long quota = 0, period = 0;
  if (!parse_number(quota_us, quota) || !parse_number(period_us, period) || quota <= 0 ||
      period <= 0)
    return 0;  // -1: no limit
  return static_cast<double>(quota) / static_cast<double>(period);
}

int cores_within(int affinity, double cpus) {
  affinity = std::max(1, affinity);
  if (cpus <= 0) return affinity;
  return std::clamp(static_cast<int>(std::ceil(cpus - 1e-9)), 1, affinity);
}

namespace {

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return in ? text.str() : std::string();
}

// The tightest CPU limit of this process's cgroup and its ancestors (a parent's quota binds its
// children), in CPUs; 0 for none. Containers usually see their own cgroup as the root of
// /sys/fs/cgroup, so the root's files are read too.
double cgroup_cpu_limit() {
  double tightest = 0;
  auto take = [&](double cpus) {
    if (cpus > 0 && (tightest == 0 || cpus < tightest)) tightest = cpus;
  };
  std::istringstream lines(read_text("/proc/self/cgroup"));
  for (std::string line; std::getline(lines, line);) {
    // "0::/a/b" (v2) or "4:cpu,cpuacct:/a/b" (v1)
    const size_t first = line.find(':'), second = line.find(':', first + 1);
    if (first == std::string::npos || second == std::string::npos) continue;
    const std::string controllers = line.substr(first + 1, second - first - 1);
    std::string path = line.substr(second + 1);
    const bool v2 = controllers.empty();
    const bool v1_cpu = ("," + controllers + ",").find(",cpu,") != std::string::npos;
    if (!v2 && !v1_cpu) continue;
    for (;;) {
      if (v2) {
        take(cpu_max_limit(read_text("/sys/fs/cgroup" + path + "/cpu.max")));
      } else {
        for (const std::string& mount :
             {std::string("/sys/fs/cgroup/cpu"), "/sys/fs/cgroup/" + controllers})
          take(cfs_quota_limit(read_text(mount + path + "/cpu.cfs_quota_us"),
                               read_text(mount + path + "/cpu.cfs_period_us")));
      }
      if (path.empty() || path == "/") break;
      path = path.substr(0, path.rfind('/'));
    }
  }
  return tightest;
}

int affinity_cpus() {
#if defined(__linux__)
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) return CPU_COUNT(&set);
#endif
  return static_cast<int>(std::thread::hardware_concurrency());
}

}  // namespace

}  // namespace device

int usable_cpus() {
  return device::cores_within(device::affinity_cpus(), device::cgroup_cpu_limit());
}

}  // namespace qmoe
