#pragma once
// Shared by the tests of the fixtures that a format's own library wrote (tests/data/*-library-*):
// qmoe's dequantized weights against the library's own decoding, stored beside the checkpoint.
#include <gtest/gtest.h>

#include <numeric>
#include <string>
#include <vector>

#include "format/safetensors.hpp"
#include "format/tensor_read.hpp"
#include "qmoe/quant.hpp"

namespace qmoe::test {

// A library fixture's layer is gated, with E experts, hidden size H and intermediate size I (call
// through ASSERT_NO_FATAL_FAILURE: the comparisons below index by these).
inline void expect_gated_layer(const QuantizedExperts& x, int64_t E, int64_t H, int64_t I) {
  ASSERT_EQ(x.num_experts(), E);
  ASSERT_EQ(x.hidden(), H);
  ASSERT_EQ(x.intermediate(), I);
  ASSERT_TRUE(x.gated());
}

// Compares, for expert e, canonical row rows[n] of `w` with row first + n of `expected` (the
// library's float32 decoding, K = w.K columns). Exact equality: the
// libraries decode (q - z) * s with s widened from its 16-bit storage, or an e2m1 value times a
// power of two, and either product is exact in float32, as it is in dequant().
inline void expect_rows_match_library(const QuantizedWeight& w, int64_t e,
                                      const std::vector<int64_t>& rows,
                                      const format::Matrix<float>& expected, int64_t first = 0) {
  const int64_t N = static_cast<int64_t>(rows.size()), K = w.K;
  ASSERT_EQ(expected.cols, K);
  ASSERT_LE(first + N, expected.rows);
  int64_t mismatches = 0, nonzero = 0;
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t k = 0; k < K; ++k) {
      const float want = expected.at(first + n, k);
      const float got = w.dequant(e, rows[static_cast<size_t>(n)], k);
      nonzero += want != 0.0f;
      if (got != want && mismatches++ < 5) {
        ADD_FAILURE() << "expert " << e << " (" << n << ", " << k << "), qmoe row "
                      << rows[static_cast<size_t>(n)] << ": qmoe " << got << ", library " << want;
      }
    }
  }
  EXPECT_EQ(mismatches, 0);
  EXPECT_GT(nonzero, N * K / 2) << "the reference should be random weights, not mostly zeros";
}

// Compares rows [row0, row0 + N) of `w` for expert e with the library's [N, K] float32 weight.
inline void expect_matches_library(const QuantizedWeight& w, int64_t e, int64_t row0,
                                   const format::TensorInfo& reference) {
  SCOPED_TRACE(reference.name);
  const int64_t N = reference.shape.at(0), K = reference.shape.at(1);
  std::vector<int64_t> rows(static_cast<size_t>(N));
  std::iota(rows.begin(), rows.end(), row0);
  expect_rows_match_library(w, e, rows, format::read_floats(reference, N, K));
}

// Every expert's gate, up and down projection of a Qwen-MoE layer 0 (w13 = [gate; up]) against
// `<module>.weight` in `reference`.
inline void expect_layer_matches_library(const QuantizedExperts& experts,
                                         const format::TensorStore& reference) {
  const int64_t I = experts.intermediate();
  for (int64_t e = 0; e < experts.num_experts(); ++e) {
    const std::string prefix = "model.layers.0.mlp.experts." + std::to_string(e) + ".";
    expect_matches_library(experts.w13(), e, 0, reference.at(prefix + "gate_proj.weight"));
    expect_matches_library(experts.w13(), e, I, reference.at(prefix + "up_proj.weight"));
    expect_matches_library(experts.w2(), e, 0, reference.at(prefix + "down_proj.weight"));
  }
}

}  // namespace qmoe::test
