// Shared MoE objects under N host threads, and bitwise determinism, for every host backend:
// - the same input gives the same bits on every run and on a second MoE prepared from the same
//   experts;
// - 4 threads running forwards at once on one MoE (each its own token windows) give exactly the
//   bits a single thread gets, and match the independent float64 reference.
// QMOE_TEST_SCALE scales the number of forwards per thread.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "qmoe/moe.hpp"
#include "support/moe_case.hpp"
#include "support/random_layer.hpp"
#include "support/test_scale.hpp"
#include "support/token_window.hpp"

namespace qmoe {
namespace {

constexpr int kThreads = 4;

bool same_bits(const Buffer& a, const Buffer& b) {
  return a.nbytes() == b.nbytes() && std::memcmp(a.data(), b.data(), size_t(a.nbytes())) == 0;
}

class SharedMoE : public testing::TestWithParam<const char*> {
 protected:
  test::MoECase c = test::make_case({.E = 6,
                                     .H = 96,
                                     .I = 64,
                                     .M = 48,
                                     .top_k = 2,
                                     .scheme = test::scheme(4, 32, true, true),
                                     .bias = true,
                                     .act_dtype = DType::bf16,
                                     .seed = 5});

  Buffer run(const MoE& moe, int64_t first, int64_t M) const {
    Buffer out(DType::bf16, {M, c.config.hidden});
    moe.forward(test::rows_of(c.hidden, first, M), test::rows_of(c.router_logits, first, M),
                out.view());
    return out;
  }
};

TEST_P(SharedMoE, SameInputSameBits) {
  const MoE a(c.config, *c.experts, GetParam()), b(c.config, *c.experts, GetParam());
  const Buffer first = run(a, 0, 48);
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(same_bits(run(a, 0, 48), first)) << "run " << i;
    EXPECT_TRUE(same_bits(run(b, 0, 48), first)) << "second MoE, run " << i;
  }
  EXPECT_LT(test::relative_error(first, c.reference), test::host_bound_for(DType::bf16));
}

TEST_P(SharedMoE, ThreadsOnOneMoEGetTheSingleThreadBits) {
  const MoE moe(c.config, *c.experts, GetParam());
  const int64_t per_thread = test::scaled_count(40);
  // Thread t, step s runs tokens [w, w + m) with w, m fixed by (t, s): windows overlap and M
  // ranges over 1..8, so threads share inputs and differ in batch shape.
  const auto window = [](int t, int64_t s) {
    const int64_t m = 1 + (t * 7 + s * 3) % 8;
    return std::pair{(t * 11 + s * 5) % (48 - m + 1), m};
  };
  std::vector<std::vector<Buffer>> expected(kThreads), got(kThreads);
  for (int t = 0; t < kThreads; ++t)
    for (int64_t s = 0; s < per_thread; ++s) {
      const auto [w, m] = window(t, s);
      expected[t].push_back(run(moe, w, m));
    }
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int64_t s = 0; s < per_thread; ++s) {
        const auto [w, m] = window(t, s);
        got[t].push_back(run(moe, w, m));
      }
    });
  }
  for (std::thread& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) {
    for (int64_t s = 0; s < per_thread; ++s) {
      const auto [w, m] = window(t, s);
      ASSERT_TRUE(same_bits(got[t][s], expected[t][s])) << "thread " << t << " step " << s;
      EXPECT_LT(test::relative_error(got[t][s], test::copy_rows(c.reference, w, m)),
                test::host_bound_for(DType::bf16));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(HostBackends, SharedMoE, testing::Values("emulation", "cpu"),
                         [](const testing::TestParamInfo<const char*>& p) {
                           return std::string(p.param);
                         });

}  // namespace
}  // namespace qmoe
