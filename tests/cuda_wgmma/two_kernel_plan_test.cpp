// One MoE, two kernels: "auto" on an sm_90 GPU prepares cuda-mma and cuda-wgmma and picks per call
// by the token count (Selection::plan), at the default crossover or one `qmoe tune` stored; both
// sides of the crossover match the independent reference; int4 codes are held once.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <fmt/format.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include "cuda/device.hpp"
#include "cuda/gpu_test.hpp"
#include "cuda_mma/on_device.hpp"
#include "moe/tuning.hpp"
#include "qmoe/moe.hpp"
#include "support/batched_case.hpp"
#include "support/expect_error.hpp"
#include "support/moe_case.hpp"

namespace qmoe {
namespace {

using test::kGpu;
using test::OnDevice;
using test::scheme;

class TwoKernelPlan : public testing::Test {
 protected:
  void SetUp() override {
    QMOE_REQUIRE_GPU();
    const CudaDeviceInfo d = current_cuda_device();
    if (d.sm_major * 10 + d.sm_minor != 90) GTEST_SKIP() << "needs an sm_90 GPU (Hopper)";
    device_name_ = d.name;
    // One file per test and process: CTest runs these tests in parallel.
    tune_file_ =
        std::filesystem::temp_directory_path() /
        fmt::format("qmoe_tune_{}_{}.json",
                    testing::UnitTest::GetInstance()->current_test_info()->name(), getpid());
    std::filesystem::remove(tune_file_);
    setenv("QMOE_TUNE_FILE", tune_file_.c_str(), 1);
  }
  void TearDown() override {
    unsetenv("QMOE_TUNE_FILE");
    std::filesystem::remove(tune_file_);
  }
  std::string device_name_;
  std::filesystem::path tune_file_;
};

double forward_error(const MoE& moe, const test::CaseSpec& spec) {
  test::MoECase c = test::make_case(spec);
  OnDevice hidden(c.hidden), logits(c.router_logits);
  OnDevice out = test::poisoned_output(spec.act_dtype, spec.M, spec.H);
  moe.forward(hidden.view, logits.view, out.view);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  return test::relative_error(test::download(out, spec.act_dtype, spec.M, spec.H), c.reference);
}

// Large enough that cuda-wgmma's cost model overtakes cuda-mma's (from ~1300 tokens): on layers of
// a few hundred channels its fixed costs never pay, and "auto" plans no second backend.
test::CaseSpec spec_at(int64_t M) {
  return {.E = 16,
          .H = 1024,
          .I = 512,
          .M = M,
          .top_k = 4,
          .scheme = scheme(4, 128),
          .act_dtype = DType::bf16,
          .seed = 7};
}

TEST_F(TwoKernelPlan, DefaultPlanOnSm90) {
  test::MoECase c = test::make_case(spec_at(1));
  c.config.activation_dtype = DType::bf16;
  MoE moe(c.config, *c.experts, "auto", kGpu);
  ASSERT_EQ(moe.selection().plan.size(), 2u);
  EXPECT_EQ(moe.selection().plan[0].backend, "cuda-mma");
  EXPECT_EQ(moe.selection().plan[1].backend, "cuda-wgmma");
  const int64_t from = moe.selection().plan[1].from_tokens;
  EXPECT_EQ(moe.backend_for(from - 1, DType::bf16), "cuda-mma");
  EXPECT_EQ(moe.backend_for(from, DType::bf16), "cuda-wgmma");
  EXPECT_EQ(moe.backend_for(from, DType::f16), "cuda-mma");  // prepared for bf16 only
}

TEST_F(TwoKernelPlan, TunedCrossoverSwitchesPerCallAndBothSidesMatch) {
  test::MoECase c = test::make_case(spec_at(1));
  c.config.activation_dtype = DType::bf16;
  store_crossover(tune_file_, device_name_, describe(*c.experts, c.config), "cuda-wgmma", 40);
  MoE moe(c.config, *c.experts, "auto", kGpu);
  ASSERT_EQ(moe.selection().plan.size(), 2u);
  EXPECT_EQ(moe.selection().plan[1].from_tokens, 40);
  EXPECT_NE(moe.selection().plan[1].why.find(tune_file_.string()), std::string::npos);
  EXPECT_EQ(moe.backend_for(39, DType::bf16), "cuda-mma");
  EXPECT_EQ(moe.backend_for(40, DType::bf16), "cuda-wgmma");
  for (int64_t M : {1, 39, 40, 300}) EXPECT_LT(forward_error(moe, spec_at(M)), 1e-2) << M;
}

TEST_F(TwoKernelPlan, OneBackendWhenAskedForOneCopy) {
  test::MoECase c = test::make_case(spec_at(1));
  c.config.activation_dtype = DType::bf16;
  c.config.large_batch_backend = false;
  MoE moe(c.config, *c.experts, "auto", kGpu);
  EXPECT_TRUE(moe.selection().plan.empty());
  EXPECT_EQ(moe.backend_for(100000, DType::bf16), "cuda-mma");
}

// Device memory the MoE of `config` holds once built (workspaces come with the first forward).
size_t bytes_held(const MoEConfig& config, const QuantizedExperts& experts) {
  size_t free_before = 0, free_after = 0, total = 0;
  EXPECT_EQ(cudaMemGetInfo(&free_before, &total), cudaSuccess);
  const MoE moe(config, experts, "auto", kGpu);
  EXPECT_EQ(cudaMemGetInfo(&free_after, &total), cudaSuccess);
  return free_before - free_after;
}

// Int4 without act-order: cuda-wgmma reads cuda-mma's codes (one copy, the default plan), adding
// only its scales; the device memory the planned MoE holds beyond the one-backend MoE is a
// fraction of the codes, not a second copy.
TEST_F(TwoKernelPlan, OneCopyOfInt4CodesServesBoth) {
  test::MoECase c = test::make_case(spec_at(1));
  c.config.activation_dtype = DType::bf16;
  const MoE moe(c.config, *c.experts, "auto", kGpu);
  ASSERT_EQ(moe.selection().plan.size(), 2u);
  const int64_t codes = 16 * (2 * 512 * 1024 + 1024 * 512) / 2;
  EXPECT_EQ(moe.selection().plan[1].shared_bytes, codes);
  EXPECT_LT(moe.selection().plan[1].weight_bytes, codes / 16);  // bf16 scales of groups of 128

  c.config.large_batch_backend = false;
  const size_t one = bytes_held(c.config, *c.experts);
  c.config.large_batch_backend.reset();
  const size_t planned = bytes_held(c.config, *c.experts);
  EXPECT_LT(double(planned) - double(one), 0.25 * double(codes)) << one << " vs " << planned;
}

// Act-order codes are not in the shared order: cuda-wgmma would need a copy of its own, so the
// MoE keeps one backend unless asked, and then both sides of the crossover match the reference.
TEST_F(TwoKernelPlan, ActOrderSecondCopyOnlyWhenAsked) {
  test::CaseSpec spec = spec_at(1);
  spec.scheme = scheme(4, 128, false, true);
  test::MoECase c = test::make_case(spec);
  c.config.activation_dtype = DType::bf16;
  EXPECT_TRUE(MoE(c.config, *c.experts, "auto", kGpu).selection().plan.empty());
  c.config.large_batch_backend = true;
  store_crossover(tune_file_, device_name_, describe(*c.experts, c.config), "cuda-wgmma", 40);
  const MoE both(c.config, *c.experts, "auto", kGpu);
  ASSERT_EQ(both.selection().plan.size(), 2u);
  EXPECT_EQ(both.selection().plan[1].shared_bytes, 0);
  for (int64_t M : {1, 40, 300}) {
    spec.M = M;
    EXPECT_LT(forward_error(both, spec), 1e-2) << M;
  }
}

// MXFP4's cuda-wgmma copy (8 bits per weight) adds more than a quarter to cuda-mma's (4.5): the
// MoE keeps one copy unless asked for the second, and then both sides of the crossover match the
// reference.
TEST_F(TwoKernelPlan, Mxfp4SecondCopyOnlyWhenAsked) {
  const test::CaseSpec spec{.E = 16,
                            .H = 1024,
                            .I = 512,
                            .M = 1,
                            .top_k = 4,
                            .scheme = {.kind = WeightKind::mxfp4, .bits = 4, .group_size = 32},
                            .activation = Activation::swigluoai,
                            .bias = true,
                            .act_dtype = DType::bf16};
  test::MoECase c = test::make_case(spec);
  c.config.activation_dtype = DType::bf16;
  EXPECT_TRUE(MoE(c.config, *c.experts, "auto", kGpu).selection().plan.empty());
  c.config.large_batch_backend = true;
  const MoE both(c.config, *c.experts, "auto", kGpu);
  ASSERT_EQ(both.selection().plan.size(), 2u);
  const int64_t from = both.selection().plan[1].from_tokens;
  EXPECT_EQ(both.backend_for(from, DType::bf16), "cuda-wgmma");
  for (int64_t M : {int64_t{1}, from}) {
    test::CaseSpec at = spec;
    at.M = M;
    EXPECT_LT(forward_error(both, at), 1e-2) << M;
  }
}

// cuda-wgmma does not take the batched-experts format: the plan's cuda-mma runs forward_batched,
// whatever its rows; a MoE of cuda-wgmma alone refuses it naming the backends that take it; a
// config asking for the format gets no plan.
TEST_F(TwoKernelPlan, ForwardBatchedRunsOnThePlansBackendThatTakesIt) {
  test::BatchedSpec spec = test::batched_spec({test::kBatchedSchemes[0], 8, 64}, DType::bf16);
  spec.H = 1024;  // a layer where the cost models plan cuda-wgmma (from ~5000 tokens)
  spec.I = 512;
  test::BatchedCase c = test::make_batched_case(spec);
  const MoE planned(c.config, *c.experts, "auto", kGpu);
  ASSERT_EQ(planned.selection().plan.size(), 2u);
  OnDevice x(c.x), counts(c.counts), out(c.out);
  planned.forward_batched(x.view, counts.view, out.view);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  Buffer result(c.out.dtype(), c.out.shape());
  out.memory.download(result.data(), size_t(result.nbytes()));
  test::expect_matches_reference(c, result, 1e-2);

  const MoE wgmma(c.config, *c.experts, "cuda-wgmma", kGpu);
  test::expect_error([&] { wgmma.forward_batched(x.view, counts.view, out.view); },
                     "backend 'cuda-wgmma' does not take the batched_experts activation format; "
                     "backends that do: cpu, emulation, cuda-mma");
  c.config.activation_format = ActivationFormat::batched_experts;
  EXPECT_TRUE(MoE(c.config, *c.experts, "auto", kGpu).selection().plan.empty());
}

}  // namespace
}  // namespace qmoe
