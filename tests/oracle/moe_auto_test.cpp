// MoE(..., "auto") asks the oracle about the device it runs on and keeps the verdicts.
#include <gtest/gtest.h>

#include "backend/backend.hpp"
#include "qmoe/moe.hpp"
#include "support/expect_error.hpp"
#include "support/moe_case.hpp"

namespace qmoe {
namespace {

TEST(MoEAuto, ChoosesTheOraclesBackendForTheHostCpu) {
  const test::MoECase c = test::make_case({.E = 4,
                                           .H = 64,
                                           .I = 32,
                                           .M = 3,
                                           .top_k = 2,
                                           .scheme = QuantScheme{.bits = 4, .group_size = 32}});
  const Selection expected = select(describe(*c.experts, c.config), host_cpu());
  const MoE moe(c.config, *c.experts, "auto");
  EXPECT_EQ(moe.backend_name(), expected.backend);
  EXPECT_EQ(moe.selection().backend, expected.backend);
  EXPECT_EQ(moe.selection().verdicts.size(), known_backends().size());
  EXPECT_NE(moe.backend_name(), "emulation");
}

TEST(MoEAuto, NamedBackendIsCheckedByTheOracle) {
  const test::MoECase c = test::make_case({.E = 4,
                                           .H = 64,
                                           .I = 32,
                                           .M = 3,
                                           .top_k = 2,
                                           .scheme = QuantScheme{.bits = 8, .group_size = 32}});
  const MoE moe(c.config, *c.experts, "emulation");
  EXPECT_EQ(moe.selection().backend, "emulation");
  EXPECT_EQ(moe.selection().verdicts.size(), known_backends().size());
  // A named backend that cannot run the layer is the oracle's error, naming the failed check.
  test::expect_error([&] { MoE(c.config, *c.experts, "cuda-mma"); },
                     "backend 'cuda-mma' cannot run this layer");
}

TEST(MoEAuto, NoAutomaticBackendPointsAtEmulation) {
  const test::MoECase c =
      test::make_case({.E = 4,
                       .H = 96,
                       .I = 48,
                       .M = 3,
                       .top_k = 2,
                       .scheme = QuantScheme{
                           .bits = 4, .group_size = 3}});  // no whole bytes per group: cpu refuses
  test::expect_error([&] { MoE(c.config, *c.experts, "auto"); },
                     "ask for backend 'emulation' explicitly");
}

}  // namespace
}  // namespace qmoe
