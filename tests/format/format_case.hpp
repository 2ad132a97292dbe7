#pragma once
// Shared by the format tests: random canonical experts whose scales and biases survive being
// stored as f16 (so a round trip can be exact), bit-for-bit comparison, scratch directories.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <string>

#include "format/json_fields.hpp"
#include "qmoe/config.hpp"
#include "qmoe/quant.hpp"
#include "support/moe_case.hpp"

namespace qmoe::test {

// The MoE shape of the small written checkpoints: 3 experts, H 64, I 32, top-2.
inline MoEConfig small_config() {
  MoEConfig config;
  config.num_experts = 3;
  config.hidden = 64;
  config.intermediate = 32;
  config.routing.top_k = 2;
  return config;
}

// Rewrites dir/config.json through `edit`.
inline void edit_config(const std::filesystem::path& dir,
                        const std::function<void(format::ordered_json&)>& edit) {
  format::ordered_json c;
  std::ifstream(dir / "config.json") >> c;
  edit(c);
  std::ofstream(dir / "config.json") << c.dump();
}

// Rounds every value to what `storage` (f16, bf16 or f32) holds exactly.
inline void round_to_storage(Buffer& b, DType storage) {
  if (b.empty() || b.dtype() != DType::f32) return;  // mxfp4 scales are e8m0 bytes
  for (float& v : b.span<float>()) {
    if (storage == DType::f16) v = to_float(to_half(v));
    if (storage == DType::bf16) v = to_float(to_bf16(v));
  }
}

// E experts, hidden H, intermediate I; w13 [E, 2I, H] (gated) and w2 [E, H, I].
inline QuantizedExperts random_experts(int64_t E, int64_t H, int64_t I, const QuantScheme& scheme,
                                       bool bias, uint64_t seed, bool gated = true,
                                       DType storage = DType::f16) {
  std::mt19937_64 rng(seed);
  QuantizedWeight w13 = random_weight(E, gated ? 2 * I : I, H, scheme, bias, rng);
  QuantizedWeight w2 = random_weight(E, H, I, scheme, bias, rng);
  for (QuantizedWeight* w : {&w13, &w2}) {
    round_to_storage(w->scales, storage);
    round_to_storage(w->bias, storage);
  }
  return QuantizedExperts(std::move(w13), std::move(w2));
}

inline bool same_bytes(const Buffer& a, const Buffer& b) {
  if (a.empty() || b.empty()) return a.empty() == b.empty();
  return a.dtype() == b.dtype() &&
         std::equal(a.shape().begin(), a.shape().end(), b.shape().begin(), b.shape().end()) &&
         std::memcmp(a.data(), b.data(), static_cast<size_t>(a.nbytes())) == 0;
}

inline void expect_identical(const QuantizedWeight& a, const QuantizedWeight& b,
                             const std::string& what) {
  EXPECT_EQ(to_string(a.scheme), to_string(b.scheme)) << what;
  EXPECT_EQ(a.E, b.E) << what;
  EXPECT_EQ(a.N, b.N) << what;
  EXPECT_EQ(a.K, b.K) << what;
  EXPECT_TRUE(same_bytes(a.codes, b.codes)) << what << ".codes";
  EXPECT_TRUE(same_bytes(a.scales, b.scales)) << what << ".scales";
  EXPECT_TRUE(same_bytes(a.zeros, b.zeros)) << what << ".zeros";
  EXPECT_TRUE(same_bytes(a.g_idx, b.g_idx)) << what << ".g_idx";
  EXPECT_TRUE(same_bytes(a.bias, b.bias)) << what << ".bias";
}

inline void expect_identical(const QuantizedExperts& a, const QuantizedExperts& b) {
  expect_identical(a.w13(), b.w13(), "w13");
  expect_identical(a.w2(), b.w2(), "w2");
}

// A fresh, empty directory under the system temp dir, removed with the object.
class ScratchDir {
 public:
  explicit ScratchDir(const std::string& tag) {
    static int counter = 0;
    path_ =
        std::filesystem::temp_directory_path() /
        ("qmoe-format-" + tag + "-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~ScratchDir() { std::filesystem::remove_all(path_); }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

}  // namespace qmoe::test
