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

// The shared int4 order inside a 32-channel span, from its definition (cuda/int4_code_order.hpp):
// column 16 jj + 8 h + 2 t + p holds channel 8 t + 4 jj + 2 h + p.
int64_t span_channel(int64_t c) {
  const int64_t base = c / 32 * 32, q = c % 32;
  const int64_t jj = q / 16, h = (q % 16) / 8, t = (q % 8) / 2, p = q % 2;
  return base + 8 * t + 4 * jj + 2 * h + p;
}

// A gated input row in strips of 16 (gate j at 16 (j / 8) + j % 8, up 8 further) rewritten in the
// activation's own order, which the reference reads.
std::vector<double> own_order(Activation a, const double* strips, int64_t I) {
  std::vector<double> row(size_t(2 * I));
  for (int64_t j = 0; j < I; ++j) {
    const double gate = strips[16 * (j / 8) + j % 8], up = strips[16 * (j / 8) + 8 + j % 8];
    if (a == Activation::swigluoai) {
      row[size_t(2 * j)] = gate, row[size_t(2 * j + 1)] = up;
    } else {
      row[size_t(j)] = gate, row[size_t(I + j)] = up;
    }
  }
  return row;
}

// rows x I outputs from rows x width inputs; rows have `pad` extra elements of stride, and the
// kernel is told to stop at `limit` rows (rows past it must keep their poison).
void run_case(Activation a, DType t, int64_t rows, int64_t I, int64_t pad, int64_t limit,
              uint64_t seed, ActivationLayout layout = {}) {
  SCOPED_TRACE(::testing::Message()
               << name(a) << " " << name(t) << " rows " << rows << " I " << I << " pad " << pad
               << " limit " << limit << " strips " << layout.gate_up_strips << " span order "
               << layout.span_order_out);
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
                                  rows, I, limit < rows ? limit_d.as<int32_t>() : nullptr, nullptr,
                                  layout));
  const auto out = to_host<uint16_t>(out_d, rows * out_stride);

  // The kernel computes in fp32 and rounds once: half an ulp of the format relative, plus fp32
  // error of the formula, which is relative too except where 1 + erf/tanh cancels for x << 0
  // (absolute ~1e-7 * |x|, hence the 1e-5 absolute term for |x| up to ~15).
  std::vector<double> ref(I);
  int failures = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const bool computed = r < limit;
    if (computed) {
      const double* row = &in.values[r * in_stride];
      const std::vector<double> reordered =
          layout.gate_up_strips && is_gated(a) ? own_order(a, row, I) : std::vector<double>{};
      apply_activation(a, params, reordered.empty() ? row : reordered.data(), 1, I, ref.data());
    }
    for (int64_t j = 0; j < I; ++j) {
      const uint16_t bits = out[r * out_stride + j];
      if (!computed) {
        if (bits != 0xffff && failures++ < 5) ADD_FAILURE() << "row " << r << " past the limit";
        continue;
      }
      const double got = half_value(t, bits),
                   want = ref[size_t(layout.span_order_out ? span_channel(j) : j)];
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

// cuda-wgmma's int4 layers: GEMM1's columns in cuda-mma's strips, GEMM2's input in the shared
// span order; both alone and together, 8-wide and (padded rows) element-wise paths.
TEST(CudaActivation, StripsAndSpanOrder) {
  QMOE_REQUIRE_GPU();
  uint64_t seed = 200;
  for (Activation a : all_activations())
    for (const ActivationLayout layout :
         {ActivationLayout{true, false}, ActivationLayout{false, true},
          ActivationLayout{true, true}})
      for (DType t : {DType::bf16, DType::f16}) {
        run_case(a, t, 7, 96, 0, 7, seed++, layout);
        run_case(a, t, 5, 64, 3, 5, seed++, layout);
      }
}

TEST(CudaActivation, RefusesLayoutsTheSizesDoNotAllow) {
  EXPECT_EQ(activation_cuda(Activation::silu, {}, DType::bf16, nullptr, 24, nullptr, 12, 1, 12,
                            nullptr, nullptr, {true, false}),
            cudaErrorInvalidValue);
  EXPECT_EQ(activation_cuda(Activation::silu, {}, DType::bf16, nullptr, 96, nullptr, 48, 1, 48,
                            nullptr, nullptr, {false, true}),
            cudaErrorInvalidValue);
}

TEST(CudaActivation, RejectsOtherDtypes) {
  EXPECT_EQ(activation_cuda(Activation::silu, {}, DType::f32, nullptr, 2, nullptr, 1, 1, 1, nullptr,
                            nullptr),
            cudaErrorInvalidValue);
}

}  // namespace
}  // namespace qmoe::test
