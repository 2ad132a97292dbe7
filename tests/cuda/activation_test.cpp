// GPU activations against the CPU reference formulas (src/act/activation.hpp) in double.
#include <cmath>
#include <random>
#include <vector>

#include "act/activation.hpp"
#include "cuda/activation.hpp"
#include "gpu_test.hpp"
#include "half_data.hpp"

namespace qmoe::test {
namespace {

// rows x I outputs from rows x width inputs; rows have `pad` extra elements of stride, and the
// kernel is told to stop at `limit` rows (rows past it must keep their poison).
void run_case(Activation a, DType t, int64_t rows, int64_t I, int64_t pad, int64_t limit,
              uint64_t seed) {
  SCOPED_TRACE(::testing::Message() << name(a) << " " << name(t) << " rows " << rows << " I " << I
                                    << " pad " << pad << " limit " << limit);
  std::mt19937_64 rng(seed);
  const int64_t width = is_gated(a) ? 2 * I : I;
  const int64_t in_stride = width + pad, out_stride = I + pad;
  // N(0, 3): reaches past the swiglu clamp limit (7) in the tails and covers both signs well.
  const HalfData in = random_half(t, rows * in_stride, rng, 3.0f);
  ActivationParams params;
  params.alpha = 1.702f;
  params.limit = 7.0f;
  params.beta = 0.5f;

  DeviceBuffer in_d = to_device(in.bits);
  DeviceBuffer out_d = poisoned(rows * out_stride * 2);
  DeviceBuffer limit_d = to_device(std::vector<int32_t>{static_cast<int32_t>(limit)});
  QMOE_CUDA_CHECK(activation_cuda(a, params, t, in_d.data(), in_stride, out_d.data(), out_stride,
                                  rows, I, limit < rows ? limit_d.as<int32_t>() : nullptr,
                                  nullptr));
  const auto out = to_host<uint16_t>(out_d, rows * out_stride);

  // The kernel computes in fp32 and rounds once: half an ulp of the format relative, plus fp32
  // error of the formula, which is relative too except where 1 + erf/tanh cancels for x << 0
  // (absolute ~1e-7 * |x|, hence the 1e-5 absolute term for |x| up to ~15).
  std::vector<double> ref(I);
  int failures = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const bool computed = r < limit;
    if (computed) apply_activation(a, params, &in.values[r * in_stride], 1, I, ref.data());
    for (int64_t j = 0; j < I; ++j) {
      const uint16_t bits = out[r * out_stride + j];
      if (!computed) {
        if (bits != 0xffff && failures++ < 5) ADD_FAILURE() << "row " << r << " past the limit";
        continue;
      }
      const double got = half_value(t, bits), want = ref[j];
      if (!(std::fabs(got - want) <= 1.01 * half_ulp(t) * std::fabs(want) + 1e-5) && failures++ < 5)
        ADD_FAILURE() << "row " << r << " col " << j << ": " << got << " vs " << want;
    }
  }
  EXPECT_EQ(failures, 0);
}

TEST(CudaActivation, EveryActivationMatchesTheReference) {
  QMOE_REQUIRE_GPU();
  uint64_t seed = 1;
  struct Shape {
    int64_t rows, I, pad;
  };
  for (Activation a : all_activations())
    for (DType t : {DType::bf16, DType::f16})
      for (const Shape s : {Shape{1, 1, 0}, Shape{3, 7, 1}, Shape{17, 64, 0}, Shape{9, 768, 8},
                            Shape{5, 2056, 0}, Shape{2, 14336, 0}, Shape{300, 96, 16}})
        run_case(a, t, s.rows, s.I, s.pad, s.rows, seed++);
}

TEST(CudaActivation, ManyRowsAndARowLimit) {
  QMOE_REQUIRE_GPU();
  run_case(Activation::silu, DType::bf16, 8192, 256, 0, 8192, 100);
  run_case(Activation::silu, DType::bf16, 1000, 64, 0, 613, 101);
  run_case(Activation::swigluoai, DType::f16, 100, 24, 8, 1, 102);
  run_case(Activation::gelu_no_mul, DType::bf16, 50, 33, 0, 0, 103);
}

TEST(CudaActivation, RejectsOtherDtypes) {
  EXPECT_EQ(activation_cuda(Activation::silu, {}, DType::f32, nullptr, 2, nullptr, 1, 1, 1, nullptr,
                            nullptr),
            cudaErrorInvalidValue);
}

}  // namespace
}  // namespace qmoe::test
