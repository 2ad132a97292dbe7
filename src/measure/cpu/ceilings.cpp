#include "measure/cpu/ceilings.hpp"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <vector>

#include "backend/cpu/huge_page_bytes.hpp"
#include "backend/cpu/thread_pool.hpp"

namespace qmoe::bench {

namespace {

constexpr int64_t kBytes = int64_t{512} << 20;  // 16x the L3
constexpr int64_t kChunks = 256;
constexpr int kTrials = 7;

template <class Body>
double best_seconds(Body&& body) {
  double best = 1e30;
  for (int t = 0; t < kTrials; ++t) {
    const auto start = std::chrono::steady_clock::now();
    body();
    const std::chrono::duration<double> d = std::chrono::steady_clock::now() - start;
    best = std::min(best, d.count());
  }
  return best;
}

}  // namespace

Ceilings measure_ceilings() {
  const int64_t words = kBytes / 8, per_chunk = words / kChunks;
  // The same page policy as the packed weights (transparent huge pages where offered), so the
  // ceiling is not lowered by TLB misses the MoE forward does not pay.
  cpu::HugePageBytes a_bytes(static_cast<size_t>(kBytes)), b_bytes(static_cast<size_t>(kBytes));
  uint64_t* a = reinterpret_cast<uint64_t*>(a_bytes.data());
  uint64_t* b = reinterpret_cast<uint64_t*>(b_bytes.data());
  std::fill(a, a + words, uint64_t{1});
  std::fill(b, b + words, uint64_t{2});
  cpu::ThreadPool& pool = cpu::ThreadPool::instance();
  const double copy = best_seconds([&] {
    pool.parallel_for(kChunks, [&](int64_t c) {
      std::memcpy(b + c * per_chunk, a + c * per_chunk, per_chunk * 8);
    });
  });
  std::vector<uint64_t> sinks(kChunks);
  const double read = best_seconds([&] {
    pool.parallel_for(kChunks, [&](int64_t c) {
      // Eight independent lanes so the loop is bound by loads, not by one dependency chain.
      uint64_t x[8] = {};
      const uint64_t* p = a + c * per_chunk;
      for (int64_t i = 0; i < per_chunk; i += 8)
        for (int j = 0; j < 8; ++j) x[j] ^= p[i + j];
      uint64_t s = 0;
      for (uint64_t v : x) s ^= v;
      sinks[c] = s;
    });
  });
  volatile uint64_t keep = sinks[0];
  (void)keep;
  return {2.0 * kBytes / copy / 1e9, kBytes / read / 1e9};
}

}  // namespace qmoe::bench
