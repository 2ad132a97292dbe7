#include "measure/cpu/ceilings.hpp"

#include <fmt/format.h>

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

// kBytes of words equal to `value`, on huge pages as the packed weights or on 4 KB pages only.
cpu::HugePageBytes filled(cpu::HugePageBytes::Pages pages, uint64_t value) {
  cpu::HugePageBytes bytes(static_cast<size_t>(kBytes), pages);
  uint64_t* words = reinterpret_cast<uint64_t*>(bytes.data());
  std::fill(words, words + kBytes / 8, value);
  return bytes;
}

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

struct CopyAndRead {
  double copy_gbps, read_gbps;
};

CopyAndRead measure_on(cpu::HugePageBytes::Pages pages) {
  const int64_t per_chunk = kBytes / 8 / kChunks;
  cpu::HugePageBytes a_bytes = filled(pages, 1), b_bytes = filled(pages, 2);
  const uint64_t* a = reinterpret_cast<const uint64_t*>(a_bytes.data());
  uint64_t* b = reinterpret_cast<uint64_t*>(b_bytes.data());
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

}  // namespace

std::string Ceilings::to_string() const {
  return fmt::format(
      "read {:.1f} GB/s (4 KB pages {:.1f}), copy {:.1f} GB/s (4 KB pages {:.1f}), on {} thread{}",
      read_gbps, read_4k_gbps, copy_gbps, copy_4k_gbps, threads, threads == 1 ? "" : "s");
}

Ceilings measure_ceilings() {
  const CopyAndRead huge = measure_on(cpu::HugePageBytes::Pages::huge),
                    small = measure_on(cpu::HugePageBytes::Pages::small_only);
  return {huge.copy_gbps, huge.read_gbps, small.copy_gbps, small.read_gbps,
          cpu::ThreadPool::instance().threads()};
}

}  // namespace qmoe::bench
