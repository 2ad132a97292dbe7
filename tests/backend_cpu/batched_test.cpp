// MoE::forward_batched on the host backends (cpu, emulation): every live row against the float64
// reference of its expert's MLP alone, the rows past each count untouched (support/
// batched_case.hpp), in the scheme's dtype and in f32; and each bad input a clear Error.
// Bounds: those of the routed tests (support/random_layer.hpp), one expert per row.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "qmoe/moe.hpp"
#include "support/batched_case.hpp"
#include "support/expect_error.hpp"
#include "support/random_layer.hpp"

namespace qmoe {
namespace {

using test::BatchedParam;

class HostBatched : public ::testing::TestWithParam<std::tuple<const char*, BatchedParam>> {};

TEST_P(HostBatched, EveryLiveRowIsItsExpertsMlpAndNoOtherRowIsWritten) {
  const auto& [backend, param] = GetParam();
  for (DType dtype : {std::get<0>(param).dtype, DType::f32}) {
    SCOPED_TRACE(name(dtype));
    test::BatchedCase c = test::make_batched_case(test::batched_spec(param, dtype));
    const MoE moe(c.config, *c.experts, backend);
    moe.forward_batched(c.x.view(), c.counts.view(), c.out.view());
    test::expect_matches_reference(c, c.out, test::host_bound_for(dtype));
  }
}

std::string host_name(const ::testing::TestParamInfo<HostBatched::ParamType>& info) {
  const auto& [backend, param] = info.param;
  return std::string(backend) + "_" + test::batched_name({param, info.index});
}

INSTANTIATE_TEST_SUITE_P(Matrix, HostBatched,
                         ::testing::Combine(::testing::Values("cpu", "emulation"),
                                            test::batched_matrix()),
                         host_name);

class HostBatchedInputs : public ::testing::TestWithParam<const char*> {
 protected:
  // E = 3, T_max = 5, H = 128, f32; counts 5, 0, 3.
  test::BatchedCase c =
      test::make_batched_case(test::batched_spec({test::kBatchedSchemes[0], 3, 5}, DType::f32));
  MoE moe{c.config, *c.experts, GetParam()};

  void expect_refused(TensorView x, TensorView counts, TensorView out, const char* fragment) {
    test::expect_error([&] { moe.forward_batched(x, counts, out); }, fragment);
  }
};

TEST_P(HostBatchedInputs, WrongShapesDtypesAndDevicesAreErrors) {
  Buffer two_d(DType::f32, {15, 128}), wide(DType::f32, {3, 5, 64}),
      four_experts(DType::f32, {4, 5, 128});
  Buffer other_t(DType::f32, {3, 6, 128}), bf16_out(DType::bf16, {3, 5, 128});
  Buffer i64_counts(DType::i64, {3}), long_counts(DType::i32, {4}), i8_x(DType::i8, {3, 5, 128});
  expect_refused(two_d.view(), c.counts.view(), c.out.view(), "x must be [E=3, T_max, H=128]");
  expect_refused(wide.view(), c.counts.view(), c.out.view(), "x must be [E=3, T_max, H=128]");
  expect_refused(four_experts.view(), c.counts.view(), c.out.view(), "x must be [E=3");
  expect_refused(i8_x.view(), c.counts.view(), c.out.view(), "x must be f32, f16 or bf16");
  expect_refused(c.x.view(), c.counts.view(), other_t.view(), "out must be [3, 5, 128] like x");
  expect_refused(c.x.view(), c.counts.view(), bf16_out.view(), "out must have the dtype of x");
  expect_refused(c.x.view(), i64_counts.view(), c.out.view(), "counts must be i32");
  expect_refused(c.x.view(), long_counts.view(), c.out.view(), "counts must be [E=3]");
  const TensorView on_gpu(c.counts.data(), DType::i32, {3}, Device{DeviceKind::cuda, 0});
  expect_refused(c.x.view(), on_gpu, c.out.view(), "counts is on cuda:0");
}

TEST_P(HostBatchedInputs, CountsOutsideZeroToTmaxAreErrors) {
  for (int32_t bad : {-1, 6}) {
    c.counts.data_as<int32_t>()[1] = bad;
    expect_refused(c.x.view(), c.counts.view(), c.out.view(),
                   fmt::format("counts[1] = {} is not a row count", bad).c_str());
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, HostBatchedInputs, ::testing::Values("cpu", "emulation"));

}  // namespace
}  // namespace qmoe
