#pragma once
// What one benchmark row runs on: a layer shape, its random quantized experts (on the device,
// plus a bf16 dequantized copy for the cuBLAS baseline), and R routing sets of M tokens each.
#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>
#include <vector>

#include "cuda/device_buffer.hpp"
#include "measure/gpu/bench_kernels.hpp"
#include "qmoe/config.hpp"
#include "qmoe/quant.hpp"

namespace qmoe::bench {

struct Shape {
  std::string name;
  int64_t H, I, E;
  int k;
  bool by_default = true;  // in a run that names no shapes
};

// The layer config of a shape as the benchmarks run it: softmax top-k, renormalized, SiLU.
MoEConfig moe_config(const Shape& s);

// The three layer shapes of docs/benchmarking.md, then gpt-oss's two (MXFP4 checkpoints; run
// when named).
const std::vector<Shape>& benchmark_shapes();

// The weight scheme of a run: `bits`-bit integer codes, one scale per `group` inputs and, with
// zero_points, one u8 zero per group (else zero 2^(bits - 1)); or, with mxfp4, e2m1 codes with
// one power-of-two scale per 32 inputs. The first is the headline scheme.
struct Scheme {
  std::string name;
  int bits = 4, group = 128;
  bool zero_points = false;
  bool mxfp4 = false;
};
const std::vector<Scheme>& benchmark_schemes();
std::string scheme_names();  // "int4-g128, ...", for help and errors
// Throws qmoe::Error naming the schemes that exist.
const Scheme& find_scheme(const std::string& name);

struct Weight {
  int64_t E = 0, N = 0, K = 0;
  Scheme scheme;
  DeviceBuffer codes, scales, zeros;  // bench_kernels.hpp's WeightView; zeros empty if symmetric
  WeightView view() const;
};

struct Experts {
  Weight w13, w2;                  // [E, 2I, H], [E, H, I]
  DeviceBuffer w13_bf16, w2_bf16;  // dequantized, for the cuBLAS baseline
};

Experts make_experts(const Shape& s, const Scheme& scheme, uint64_t seed, cudaStream_t stream);
// The same weights as canonical host QuantizedExperts, for backends.
QuantizedExperts to_canonical(const Experts& x);

// Bytes one expert's weights occupy as codes + 16-bit scales (+ 8-bit zeros; MXFP4: codes +
// 8-bit e8m0 scales, 4.25 bits per weight): what a backend must read at the least.
int64_t weight_bytes_per_expert(const Shape& s, const Scheme& scheme);

// One routing set: fresh hidden states and router logits, routed on the GPU (softmax top-k,
// renormalized), and the baseline's alignment (tile height 1: rows grouped by expert, no padding).
struct RoutingSet {
  int64_t M = 0;
  DeviceBuffer x;                           // bf16 [M, H], N(0, 1)
  DeviceBuffer logits;                      // f32 [M, E], N(0, 1)
  DeviceBuffer topk_weights;                // f32 [M, k]
  DeviceBuffer topk_ids;                    // i32 [M, k]
  DeviceBuffer sorted_pair_ids, pair_rows;  // i32 [M*k]
  std::vector<int32_t> ids_host;            // [M*k]
  std::vector<int32_t> expert_offsets;      // [E+1] rows of each expert in sorted order
  int64_t experts_hit = 0;
};

RoutingSet make_routing_set(const Shape& s, int64_t M, uint64_t seed, cudaStream_t stream);

}  // namespace qmoe::bench
