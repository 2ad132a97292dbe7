// The cpu backend's thread count (qmoe/threads.hpp): where its default comes from, that callers
// can set it, and that forwards called from several threads at once never run more than that
// many bodies at the same time.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "backend/cpu/thread_pool.hpp"
#include "device/usable_cpus.hpp"
#include "qmoe/error.hpp"
#include "qmoe/threads.hpp"

#if defined(__linux__)
#include <sched.h>
#endif

namespace qmoe {
namespace {

TEST(CgroupCpuLimit, ReadsV2CpuMax) {
  EXPECT_DOUBLE_EQ(device::cpu_max_limit("200000 100000\n"), 2.0);
  EXPECT_DOUBLE_EQ(device::cpu_max_limit("150000 100000"), 1.5);
  EXPECT_DOUBLE_EQ(device::cpu_max_limit("max 100000\n"), 0.0);  // no limit
  for (const char* garbage : {"", "200000", "x 100000", "200000 0", "-5 100000", "1 2 3"})
    EXPECT_DOUBLE_EQ(device::cpu_max_limit(garbage), 0.0) << garbage;
}

TEST(CgroupCpuLimit, ReadsV1CfsQuota) {
  EXPECT_DOUBLE_EQ(device::cfs_quota_limit("50000\n", "100000\n"), 0.5);
  EXPECT_DOUBLE_EQ(device::cfs_quota_limit("400000", "100000"), 4.0);
  EXPECT_DOUBLE_EQ(device::cfs_quota_limit("-1\n", "100000\n"), 0.0);  // no limit
  EXPECT_DOUBLE_EQ(device::cfs_quota_limit("", ""), 0.0);              // no such file
}

TEST(CgroupCpuLimit, RoundsUpWithinTheAffinityMask) {
  EXPECT_EQ(device::cores_within(64, 1.5), 2);
  EXPECT_EQ(device::cores_within(64, 0.2), 1);
  EXPECT_EQ(device::cores_within(64, 2.0), 2);
  EXPECT_EQ(device::cores_within(4, 16.0), 4);  // the mask binds
  EXPECT_EQ(device::cores_within(8, 0.0), 8);   // no limit
  EXPECT_EQ(device::cores_within(0, 0.0), 1);
}

#if defined(__linux__)
// sched_setaffinity(0) pins the calling thread only, so a fresh thread can shrink its own mask
// without touching the test process.
TEST(UsableCpus, FollowsTheAffinityMask) {
  int seen = 0;
  std::thread pinned([&] {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(sched_getcpu(), &one);
    ASSERT_EQ(sched_setaffinity(0, sizeof one, &one), 0);
    seen = usable_cpus();
  });
  pinned.join();
  EXPECT_EQ(seen, 1);
  cpu_set_t mine;
  ASSERT_EQ(sched_getaffinity(0, sizeof mine, &mine), 0);
  EXPECT_LE(usable_cpus(), CPU_COUNT(&mine));
  EXPECT_GE(usable_cpus(), 1);
}
#endif

TEST(CpuThreads, CanBeSetAndRefusesNonsense) {
  const int before = cpu_threads();
  set_cpu_threads(3);
  EXPECT_EQ(cpu_threads(), 3);
  EXPECT_EQ(cpu::ThreadPool::instance().threads(), 3);
  set_cpu_threads(1);
  EXPECT_EQ(cpu_threads(), 1);
  for (int bad : {0, -2, 1025}) {
    try {
      set_cpu_threads(bad);
      ADD_FAILURE() << bad << " was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("valid: 1..1024"), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(cpu_threads(), 1);
  set_cpu_threads(before);
}

// Four callers at once, each a loop of slow items on a pool of 2: every item runs exactly once,
// and never more than 2 bodies run at the same moment (the callers take turns on the pool
// instead of adding their own threads to it).
TEST(CpuThreadPool, ConcurrentCallersNeverOversubscribe) {
  cpu::ThreadPool pool(2);
  constexpr int kCallers = 4, kItems = 40;
  std::atomic<int> running{0}, most{0};
  std::vector<std::atomic<int>> hits(kCallers * kItems);
  std::vector<std::thread> callers;
  for (int c = 0; c < kCallers; ++c) {
    callers.emplace_back([&, c] {
      pool.parallel_for(kItems, [&](int64_t i) {
        const int now = ++running;
        int seen = most.load();
        while (now > seen && !most.compare_exchange_weak(seen, now)) {
        }
        std::this_thread::sleep_for(std::chrono::microseconds(200));
        ++hits[c * kItems + i];
        --running;
      });
    });
  }
  for (std::thread& t : callers) t.join();
  for (const auto& h : hits) EXPECT_EQ(h.load(), 1);
  EXPECT_LE(most.load(), 2);
  EXPECT_GE(most.load(), 1);
}

}  // namespace
}  // namespace qmoe
