#pragma once
// Cases of the batched-experts format (MoE::forward_batched) and their truth: each live row of
// x [E, T_max, H] against the float64 reference (src/sample/reference_moe.hpp) of its expert's
// MLP alone (top-1 routing to that expert with weight 1), never against forward_batched itself.
// `out` starts filled with a byte pattern, so rows at or past an expert's count must keep it.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "sample/reference_moe.hpp"
#include "support/moe_case.hpp"

namespace qmoe::test {

inline constexpr unsigned char kUntouched = 0xAB;

struct BatchedSpec {
  int64_t E = 3, T_max = 5, H = 64, I = 64;
  QuantScheme scheme{};
  Activation activation = Activation::silu;
  bool bias = false;
  DType dtype = DType::f32;
  std::vector<int32_t> counts;  // [E]
  uint64_t seed = 1;
};

struct BatchedCase {
  MoEConfig config;
  std::unique_ptr<QuantizedExperts> experts;
  Buffer x;    // [E, T_max, H]
  Buffer out;  // [E, T_max, H], every byte kUntouched
  Buffer counts;
};

inline BatchedCase make_batched_case(const BatchedSpec& s) {
  MoECase layer = make_case({.E = s.E,
                             .H = s.H,
                             .I = s.I,
                             .M = 1,
                             .top_k = 1,
                             .scheme = s.scheme,
                             .activation = s.activation,
                             .bias = s.bias,
                             .act_dtype = s.dtype,
                             .seed = s.seed});
  BatchedCase c{std::move(layer.config), std::move(layer.experts),
                Buffer(s.dtype, {s.E, s.T_max, s.H}), Buffer(s.dtype, {s.E, s.T_max, s.H}),
                Buffer(DType::i32, {s.E})};
  std::mt19937_64 rng(s.seed + 1);
  fill_normal(c.x, rng);
  std::memset(c.out.data(), kUntouched, size_t(c.out.nbytes()));
  std::memcpy(c.counts.data(), s.counts.data(), size_t(c.counts.nbytes()));
  return c;
}

// Rows [0, count) of expert e's block of a [E, T_max, H] buffer, as their own [count, H] buffer.
inline Buffer expert_rows(const Buffer& b, int64_t e, int64_t count) {
  const int64_t T_max = b.dim(1), H = b.dim(2), row_bytes = H * size_of(b.dtype());
  Buffer rows(b.dtype(), {count, H});
  std::memcpy(rows.data(), static_cast<const char*>(b.data()) + e * T_max * row_bytes,
              size_t(count * row_bytes));
  return rows;
}

// Every live row against the reference (normalized error per expert below `bound`), every other
// row of out still kUntouched.
inline void expect_matches_reference(const BatchedCase& c, const Buffer& out, double bound) {
  const int64_t E = c.x.dim(0), T_max = c.x.dim(1), H = c.x.dim(2);
  const int64_t row_bytes = H * size_of(out.dtype());
  for (int64_t e = 0; e < E; ++e) {
    const int64_t count = c.counts.data_as<int32_t>()[e];
    if (count > 0) {
      sample::ReferenceRouting one_expert{1, std::vector<int32_t>(size_t(count), int32_t(e)),
                                          std::vector<double>(size_t(count), 1.0)};
      const Buffer truth =
          sample::reference_forward(c.config, *c.experts, expert_rows(c.x, e, count), one_expert);
      EXPECT_LT(relative_error(expert_rows(out, e, count), truth), bound) << "expert " << e;
    }
    for (int64_t t = count; t < T_max; ++t) {
      const auto* row = static_cast<const unsigned char*>(out.data()) + (e * T_max + t) * row_bytes;
      for (int64_t i = 0; i < row_bytes; ++i)
        if (row[i] != kUntouched) {
          ADD_FAILURE() << "out[" << e << ", " << t << "] was written; count is " << count;
          break;
        }
    }
  }
}

// The schemes every backend's batched test runs, each in a dtype every backend that takes the
// format takes (the host suites add f32).
struct BatchedScheme {
  const char* name;
  QuantScheme scheme;
  Activation activation;
  bool bias;
  DType dtype;
};
inline const BatchedScheme kBatchedSchemes[] = {
    {"int4_g128_sym", scheme(4, 128), Activation::silu, false, DType::bf16},
    {"int8_g64_asym_bias", scheme(8, 64, true), Activation::silu, true, DType::f16},
    {"mxfp4_swigluoai_bias", QuantScheme{.kind = WeightKind::mxfp4, .bits = 4, .group_size = 32},
     Activation::swigluoai, true, DType::bf16},
};

// Counts of E experts at T_max rows: full, empty, part-full and single rows, in turn.
inline std::vector<int32_t> mixed_counts(int64_t E, int64_t T_max) {
  const auto full = static_cast<int32_t>(T_max);
  const int32_t pattern[] = {full, 0, full / 2 + 1 < full ? full / 2 + 1 : full, 1};
  std::vector<int32_t> counts;
  for (int64_t e = 0; e < E; ++e) counts.push_back(pattern[e % 4]);
  return counts;
}

// (scheme, E, T_max): the matrix of the batched tests.
using BatchedParam = std::tuple<BatchedScheme, int64_t, int64_t>;

inline BatchedSpec batched_spec(const BatchedParam& p, DType dtype) {
  const auto& [s, E, T_max] = p;
  return {.E = E,
          .T_max = T_max,
          .H = 128,
          .I = 128,
          .scheme = s.scheme,
          .activation = s.activation,
          .bias = s.bias,
          .dtype = dtype,
          .counts = mixed_counts(E, T_max),
          .seed = uint64_t(E * 100 + T_max)};
}

inline auto batched_matrix() {
  return ::testing::Combine(::testing::ValuesIn(kBatchedSchemes),
                            ::testing::Values<int64_t>(1, 3, 8),
                            ::testing::Values<int64_t>(1, 5, 64));
}

inline std::string batched_name(const ::testing::TestParamInfo<BatchedParam>& info) {
  const auto& [s, E, T_max] = info.param;
  return std::string(s.name) + "_E" + std::to_string(E) + "_T" + std::to_string(T_max);
}

}  // namespace qmoe::test
