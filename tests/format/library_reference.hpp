#pragma once
// Shared by the tests of the fixtures that a format's own library wrote (tests/data/*-library-*):
// qmoe's dequantized weights against the library's own decoding, stored beside the checkpoint.
#include <gtest/gtest.h>

#include <string>

#include "format/safetensors.hpp"
#include "format/tensor_read.hpp"
#include "qmoe/quant.hpp"

namespace qmoe::test {

// Compares rows [row0, row0 + N) of `w` for expert e with the library's [N, K] float32 weight.
// Exact equality: the libraries decode (q - z) * s with s widened from its 16-bit storage, and that
// product of a small integer and a 16-bit float is exact in float32, as it is in dequant().
inline void expect_matches_library(const QuantizedWeight& w, int64_t e, int64_t row0,
                                   const format::TensorInfo& reference) {
  SCOPED_TRACE(reference.name);
  const int64_t N = reference.shape.at(0), K = reference.shape.at(1);
  ASSERT_EQ(K, w.K);
  const format::Matrix<float> expected = format::read_floats(reference, N, K);
  int64_t mismatches = 0, nonzero = 0;
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t k = 0; k < K; ++k) {
      const float want = expected.at(n, k);
      const float got = w.dequant(e, row0 + n, k);
      nonzero += want != 0.0f;
      if (got != want && mismatches++ < 5) {
        ADD_FAILURE() << "(" << n << ", " << k << "): qmoe " << got << ", library " << want;
      }
    }
  }
  EXPECT_EQ(mismatches, 0);
  EXPECT_GT(nonzero, N * K / 2) << "the reference should be random weights, not mostly zeros";
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
