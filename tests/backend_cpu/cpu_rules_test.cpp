// The cpu backend's contract beyond numbers: bad input is a clear Error, results do not depend
// on the thread count, and the ISA override is validated.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <functional>
#include <string>

#include "backend/backend.hpp"
#include "backend/cpu/cpu_experts.hpp"
#include "backend/cpu/isa.hpp"
#include "backend/cpu/thread_pool.hpp"
#include "backend_cpu/isa_scope.hpp"
#include "oracle/descriptor.hpp"
#include "qmoe/error.hpp"
#include "qmoe/moe.hpp"
#include "support/moe_case.hpp"
#include "support/prepared_bytes_layers.hpp"

namespace qmoe {
namespace {

// MoE asks the oracle first, which refuses these layers by the descriptor's rules (tested in
// tests/oracle); the backend's own prepare must refuse them too when called directly.
void prepare_on_cpu(const QuantizedExperts& experts, const MoEConfig& config,
                    Device device = Device{}) {
  find_backend("cpu")->prepare(experts, config, device);
}

// Passes when f throws qmoe::Error and its message contains `part`.
testing::AssertionResult throws_error_with(const std::function<void()>& f,
                                           const std::string& part) {
  try {
    f();
  } catch (const Error& e) {
    if (std::string(e.what()).find(part) != std::string::npos) return testing::AssertionSuccess();
    return testing::AssertionFailure() << "message \"" << e.what() << "\" lacks \"" << part << '"';
  }
  return testing::AssertionFailure() << "no Error thrown";
}

// What `qmoe explain` reports as the cpu backend's copy of a layer (its descriptor's formula,
// from the shapes) is what prepare allocates, and the padding is the code bytes of padded rows.
TEST(CpuBackend, DescriptorCountsThePreparedBytes) {
  for (const test::CaseSpec& spec : test::prepared_bytes_layers()) {
    const test::MoECase c = test::make_case(spec);
    SCOPED_TRACE(to_string(spec.scheme));
    const auto prepared = find_backend("cpu")->prepare(*c.experts, c.config, Device{});
    const auto& x = static_cast<const cpu::CpuExperts&>(*prepared);
    int64_t total = int64_t(x.w2_position.size()) * 4, codes = 0;
    for (const cpu::PackedMatrix* m : {&x.w13, &x.w2}) {
      total += int64_t(m->bytes.size() + m->bias.size() * 4 + m->k_order.size() * 4);
      codes += m->E * m->panels * cpu::kTileRows * m->K * m->format.bits / 8;
    }
    const int64_t canonical = c.experts->w13().codes.nbytes() + c.experts->w2().codes.nbytes();
    const PreparedBytes counted =
        find_descriptor("cpu")->prepared_bytes(describe(*c.experts, c.config));
    EXPECT_EQ(counted.total, total);
    EXPECT_EQ(counted.padding, codes - canonical);
  }
}

TEST(CpuBackend, RejectsCudaDevice) {
  test::MoECase c = test::make_case({});
  EXPECT_TRUE(throws_error_with(
      [&] {
        prepare_on_cpu(*c.experts, c.config, Device{DeviceKind::cuda, 0});
      },
      "runs on the CPU"));
}

TEST(CpuBackend, RejectsOdd4BitGroup) {
  test::MoECase c = test::make_case({.H = 66, .I = 66, .scheme = QuantScheme{.group_size = 33}});
  EXPECT_TRUE(throws_error_with([&] { prepare_on_cpu(*c.experts, c.config); }, "odd"));
}

TEST(CpuBackend, RejectsActOrderGroupsOfUnequalSize) {
  test::MoECase c = test::make_case(
      {.H = 64, .I = 64, .scheme = QuantScheme{.group_size = 32, .act_order = true}});
  QuantizedWeight w13 = c.experts->w13().clone();
  w13.g_idx.data_as<int32_t>()[0] = 1 - w13.g_idx.data_as<int32_t>()[0];  // one channel moves
  const QuantizedExperts moved(std::move(w13), c.experts->w2().clone());
  EXPECT_TRUE(
      throws_error_with([&] { prepare_on_cpu(moved, c.config); }, "exactly the group size"));
  // The oracle knows the rule too, so the MoE is refused before prepare runs.
  EXPECT_TRUE(
      throws_error_with([&] { MoE(c.config, moved, "cpu"); }, "act-order groups of unequal size"));
}

TEST(CpuBackend, RejectsKSplitActOrderShard) {
  const QuantScheme act_order{.group_size = 32, .act_order = true};
  test::MoECase c = test::make_case({.H = 64, .I = 32, .scheme = act_order});
  test::MoECase whole = test::make_case({.H = 64, .I = 64, .scheme = act_order});
  // The first half of K (32 of 64 channels) of w2, keeping the full-K scales and groups.
  const QuantizedWeight& from = whole.experts->w2();
  QuantizedWeight half{from.scheme,
                       from.E,
                       from.N,
                       32,
                       Buffer(DType::u8, {from.E, from.N, 16}),
                       from.scales.clone(),
                       Buffer{},
                       Buffer(DType::i32, {from.E, 32}),
                       Buffer{},
                       64};
  for (int64_t e = 0; e < from.E; ++e) {
    for (int64_t n = 0; n < from.N; ++n)
      for (int64_t b = 0; b < 16; ++b)
        half.codes.data_as<uint8_t>()[(e * from.N + n) * 16 + b] =
            from.codes.data_as<uint8_t>()[(e * from.N + n) * 32 + b];
    for (int64_t k = 0; k < 32; ++k)
      half.g_idx.data_as<int32_t>()[e * 32 + k] = from.g_idx.data_as<int32_t>()[e * 64 + k];
  }
  const QuantizedExperts shard(c.experts->w13().clone(), std::move(half));
  EXPECT_TRUE(
      throws_error_with([&] { prepare_on_cpu(shard, c.config); }, "K-split act-order shard"));
}

TEST(CpuBackend, RejectsExpertIdOutOfRange) {
  test::MoECase c = test::make_case({.E = 4, .M = 3});
  MoE moe(c.config, *c.experts, "cpu");
  c.topk_ids.data_as<int32_t>()[3] = 4;
  Buffer out(DType::f32, {3, 256});
  EXPECT_TRUE(throws_error_with(
      [&] {
        moe.forward_routed(c.hidden.view(), c.topk_weights.view(), c.topk_ids.view(), out.view());
      },
      "topk_ids[1, 1] = 4"));
}

TEST(CpuBackend, RejectsUnknownIsa) {
  test::MoECase c = test::make_case({});
  test::IsaScope isa("sse9");
  EXPECT_TRUE(throws_error_with([&] { MoE(c.config, *c.experts, "cpu"); }, "avx512, avx2"));
}

TEST(CpuBackend, SameBitsForAnyThreadCount) {
  test::MoECase c = test::make_case({.E = 8, .H = 128, .I = 128, .M = 40, .top_k = 3});
  MoE moe(c.config, *c.experts, "cpu");
  cpu::ThreadPool& pool = cpu::ThreadPool::instance();
  const int before = pool.threads();
  auto run = [&](int threads) {
    pool.resize(threads);
    Buffer out(DType::f32, {40, 128});
    moe.forward_routed(c.hidden.view(), c.topk_weights.view(), c.topk_ids.view(), out.view());
    return out;
  };
  const Buffer one = run(1), three = run(3);
  pool.resize(before);
  EXPECT_EQ(std::memcmp(one.data(), three.data(), one.nbytes()), 0);
}

TEST(CpuThreadPool, VisitsEveryIndexOnceAndRethrows) {
  cpu::ThreadPool pool(3);
  std::vector<std::atomic<int>> hits(1000);
  pool.parallel_for(1000, [&](int64_t i) { hits[i]++; });
  for (const auto& h : hits) EXPECT_EQ(h.load(), 1);
  EXPECT_THROW(pool.parallel_for(100,
                                 [](int64_t i) {
                                   if (i == 57) throw Error("item 57");
                                 }),
               Error);
  int after = 0;
  pool.parallel_for(10, [&](int64_t) { __atomic_add_fetch(&after, 1, __ATOMIC_RELAXED); });
  EXPECT_EQ(after, 10);
}

}  // namespace
}  // namespace qmoe
