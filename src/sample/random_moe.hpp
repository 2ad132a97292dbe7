#pragma once
// Random MoE layers with inputs and their float64 ground truth: the data of `qmoe demo`, the
// tests of every backend and the benchmarks.
//   MoECase c = make_case({.E = 8, .H = 256, .I = 128, .M = 7, .top_k = 2, .scheme = ...});
//   run a backend on c.hidden / c.topk_weights / c.topk_ids into an out buffer, then
//   compare: relative_error(out, c.reference) < bound.
#include <cstdint>
#include <memory>
#include <random>

#include "qmoe/config.hpp"
#include "qmoe/quant.hpp"

namespace qmoe::sample {

struct CaseSpec {
  int64_t E = 8, H = 256, I = 128, M = 4;
  int top_k = 2;
  QuantScheme scheme{};
  Activation activation = Activation::silu;
  bool bias = false;
  DType act_dtype = DType::f32;  // dtype of hidden and out
  bool router_weight_on_input = false;
  uint64_t seed = 1;
};

struct MoECase {
  MoEConfig config;
  std::unique_ptr<QuantizedExperts> experts;
  Buffer hidden;         // act_dtype [M, H], N(0, 1)
  Buffer router_logits;  // f32 [M, E], N(0, 1)
  Buffer topk_weights;   // f32 [M, k], from the independent float64 router (reference_moe.hpp)
  Buffer topk_ids;       // i32 [M, k]
  Buffer reference;      // f64 [M, H]: the independent float64 forward (reference_moe.hpp)
};

// Random float weights ~ N(0, 1/K) quantized with the reference quantizer (random act-order
// permutation when the scheme asks for one). Bias ~ N(0, 0.1).
QuantizedWeight random_weight(int64_t E, int64_t N, int64_t K, const QuantScheme& scheme, bool bias,
                              std::mt19937_64& rng);

// Uniformly random codes (and zero points) with scales ~ 1/(4.6 sqrt K) (+-25%; MXFP4: e8m0
// scales of the powers of two around 1/(3 sqrt K)), straight from a fast generator: for
// benchmark-sized layers, where quantizing float weights would take minutes and gigabytes for the
// same statistics. Schemes without act-order.
QuantizedWeight random_codes_weight(int64_t E, int64_t N, int64_t K, const QuantScheme& scheme,
                                    std::mt19937_64& rng);

MoECase make_case(const CaseSpec& spec);

// The inputs and float64 reference for given experts (e.g. a checkpoint's layer): hidden
// ~ N(0, 1) in `act_dtype`, router logits ~ N(0, 1), both drawn from `rng`.
MoECase make_case(MoEConfig config, QuantizedExperts experts, int64_t M, DType act_dtype,
                  std::mt19937_64& rng);
// The same for given hidden states ([M, H], f32 / bf16 / f16) and router logits (f32 [M, E]);
// throws Error naming the expected shape when they do not fit the layer.
MoECase make_case(MoEConfig config, QuantizedExperts experts, Buffer hidden, Buffer router_logits);

// ||out - reference|| / ||reference|| over all elements; out may be f64, f32, f16 or bf16.
double relative_error(const Buffer& out, const Buffer& reference);

// Rounds every value of an f32 buffer to the nearest `dtype` value (f16 / bf16), as a checkpoint
// storing it in that dtype would hold it.
void round_to_dtype(Buffer& f32_values, DType dtype);

// Fills a buffer of any float dtype with N(mean, stddev) samples (rounded to its dtype).
void fill_normal(Buffer& b, std::mt19937_64& rng, double mean = 0.0, double stddev = 1.0);

}  // namespace qmoe::sample
