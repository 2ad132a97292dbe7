#include "backend/cuda_wgmma/kernel_weight.hpp"

#include <algorithm>
#include <thread>

#include "backend/cuda_wgmma/mxfp4_recode.hpp"
#include "core/check.hpp"
#include "cuda/cuda_check.hpp"
#include "cuda/int4_code_order.hpp"
#include "qmoe/threads.hpp"
#include "quant/act_order.hpp"

namespace qmoe::cuda_wgmma {

namespace {

uint16_t bits_of(float v, DType act) {
  return act == DType::bf16 ? to_bf16(v).bits : to_half(v).bits;
}
float rounded(float v, DType act) {
  return act == DType::bf16 ? to_float(to_bf16(v)) : to_float(to_half(v));
}

Code code_of(const QuantScheme& s) {
  if (s.kind == WeightKind::mxfp4) return Code::e4m3;
  return s.bits == 4 ? Code::int4 : Code::int8;
}

const char* name(Code c) {
  switch (c) {
    case Code::int4: return "int4";
    case Code::int8: return "int8";
    case Code::e4m3: return "fp8 e4m3 (mxfp4)";
  }
  return "?";
}

// The group a kernel scale covers: MXFP4 is re-coded at one scale per K tile.
int64_t kernel_group(const QuantizedWeight& w) {
  return w.scheme.kind == WeightKind::mxfp4 ? kTileK : w.scheme.group_size_for(w.K);
}

// [E, N, K] K-major nibbles -> the order cuda-mma shares (code_order.hpp), experts in parallel.
std::vector<uint8_t> in_shared_int4_order(const std::vector<uint8_t>& k_major, int64_t E, int64_t N,
                                          int64_t K) {
  std::vector<uint8_t> out(k_major.size(), 0);
  const int64_t expert_bytes = N * K / 2, chunks = K / int4_order::kChunk;
  auto reorder = [&](int64_t e) {
    const uint8_t* src = k_major.data() + e * expert_bytes;
    uint8_t* dst = out.data() + e * expert_bytes;
    for (int64_t n = 0; n < N; ++n)
      for (int64_t k = 0; k < K; ++k) {
        const int nibble = (src[(n * K + k) / 2] >> (4 * (k % 2))) & 0xF;
        const int64_t at = int4_order::code_nibble(n, k, chunks);
        dst[at / 2] = uint8_t(dst[at / 2] | nibble << (4 * (at % 2)));
      }
  };
  const int64_t threads = std::clamp<int64_t>(usable_cpus(), 1, std::clamp<int64_t>(E, 1, 16));
  std::vector<std::thread> pool;
  for (int64_t i = 0; i < threads; ++i)
    pool.emplace_back([&, i] {
      for (int64_t e = i; e < E; e += threads) reorder(e);
    });
  for (std::thread& th : pool) th.join();
  return out;
}

}  // namespace

std::vector<int32_t> kernel_channels(const QuantizedWeight& w, const std::string& what) {
  if (!w.scheme.act_order) return {};
  check(w.K_full == 0 || w.K_full == w.K,
        "cuda-wgmma: {} is a K-split act-order shard (K = {} of K_full = {}); the kernel runs "
        "whole-K act-order weights only (valid: TP 1 or expert parallelism)",
        what, w.K, w.K_full);
  std::vector<int32_t> channels;
  channels.reserve(size_t(w.E * w.K));
  for (int64_t e = 0; e < w.E; ++e) {
    const std::vector<int32_t> order = even_act_order(w, e, "cuda-wgmma", what);
    channels.insert(channels.end(), order.begin(), order.end());
  }
  return channels;
}

bool int4_codes(const QuantizedWeight& w) {
  return w.scheme.kind != WeightKind::mxfp4 && w.scheme.bits == 4;
}

std::vector<int32_t> w13_kernel_rows(const QuantizedExperts& experts, Activation activation) {
  const std::vector<int32_t> w2_channels = kernel_channels(experts.w2(), "w2");
  const bool strips = experts.gated() && int4_codes(experts.w13());
  if (w2_channels.empty() && !strips) return {};
  const int64_t E = experts.num_experts(), I = experts.intermediate(), N = experts.w13().N;
  check(!strips || I % 8 == 0,
        "cuda-wgmma: w13 has {} rows; int4 codes need gate and up rows in whole strips of 8", N);
  const bool interleaved = activation == Activation::swigluoai;
  std::vector<int32_t> rows(size_t(E * N));
  for (int64_t e = 0; e < E; ++e) {
    int32_t* r = rows.data() + e * N;
    for (int64_t j = 0; j < I; ++j) {
      const auto c = w2_channels.empty() ? int32_t(j) : w2_channels[size_t(e * I + j)];
      if (!experts.gated()) {
        r[j] = c;
        continue;
      }
      const int32_t gate = interleaved ? 2 * c : c, up = interleaved ? 2 * c + 1 : int32_t(I) + c;
      const int64_t at_gate = strips ? 16 * (j / 8) + j % 8 : interleaved ? 2 * j : j;
      const int64_t at_up = strips ? at_gate + 8 : interleaved ? at_gate + 1 : I + j;
      r[at_gate] = gate;
      r[at_up] = up;
    }
  }
  return rows;
}

std::vector<int32_t> gather_channels(const QuantizedWeight& w13) {
  std::vector<int32_t> channels = kernel_channels(w13, "w13");
  if (channels.empty() || !int4_codes(w13)) return channels;
  std::vector<int32_t> permuted(channels.size());
  for (size_t k = 0; k < channels.size(); ++k) {
    const size_t span = k / int4_order::kSpan * int4_order::kSpan;
    permuted[k] = channels[span + size_t(int4_order::span_column_k(int(k - span)))];
  }
  return permuted;
}

HostKernelWeight to_kernel_layout(const QuantizedWeight& w, DType act, const std::string& what,
                                  std::span<const int32_t> rows, bool with_codes) {
  const QuantScheme& s = w.scheme;
  check(s.activation_quant == ActivationQuant::none,
        "cuda-wgmma: {} is {}; MXFP4 activations (W4A4) run on emulation only", what, to_string(s));
  check(act == DType::bf16 || act == DType::f16,
        "cuda-wgmma: activations must be bf16 or f16, got {}", name(act));
  check(rows.empty() || int64_t(rows.size()) == w.E * w.N,
        "cuda-wgmma: {} has {} rows but a row order of {} entries", what, w.E * w.N, rows.size());
  HostKernelWeight h;
  if (s.kind == WeightKind::mxfp4) {
    recode_mxfp4(w, act, what, rows, h);
    return h;
  }
  const std::vector<int32_t> channels = kernel_channels(w, what);
  h.group_size = int(s.group_size_for(w.K));
  auto source_row = [&](int64_t e, int64_t n) {
    return rows.empty() ? n : rows[size_t(e * w.N + n)];
  };

  // Unsigned code c -> signed c - 2^(bits-1): flipping the top bit of each code does it.
  const uint8_t flip = s.bits == 4 ? 0x88 : 0x80;
  const int64_t row_bytes = w.code_bytes_per_row();
  check(s.bits != 4 || (w.N % 16 == 0 && w.K % int4_order::kChunk == 0),
        "cuda-wgmma: {} has {} rows and K = {}; int4 codes need rows in whole strips of 16 and K "
        "in whole chunks of {}",
        what, w.N, w.K, int4_order::kChunk);
  h.codes.resize(with_codes ? size_t(w.codes.numel()) : 0);
  for (int64_t e = 0; e < w.E && with_codes; ++e)
    for (int64_t n = 0; n < w.N; ++n) {
      const uint8_t* src = w.codes.data_as<uint8_t>() + (e * w.N + source_row(e, n)) * row_bytes;
      uint8_t* dst = h.codes.data() + (e * w.N + n) * row_bytes;
      if (channels.empty()) {
        for (int64_t b = 0; b < row_bytes; ++b) dst[b] = src[b] ^ flip;
        continue;
      }
      const int32_t* c = channels.data() + e * w.K;
      if (s.bits == 8) {
        for (int64_t k = 0; k < w.K; ++k) dst[k] = src[c[k]] ^ flip;
        continue;
      }
      auto nibble = [&](int32_t k) { return (src[k / 2] >> (4 * (k % 2))) & 0xF; };
      for (int64_t k = 0; k < w.K; k += 2)
        dst[k / 2] = uint8_t((nibble(c[k]) | nibble(c[k + 1]) << 4) ^ flip);
    }
  if (s.bits == 4 && with_codes) h.codes = in_shared_int4_order(h.codes, w.E, w.N, w.K);

  // With act-order, sorted column j lies in group j / group_size (even groups), so every
  // group's scale stays at its index.
  const int64_t G = w.groups();
  const auto* scales = w.scales.data_as<float>();
  const auto* zeros = s.has_zero_points() ? w.zeros.data_as<uint8_t>() : nullptr;
  h.scales.resize(size_t(w.E * G * w.N));
  if (zeros) h.zero_terms.resize(h.scales.size());
  for (int64_t e = 0; e < w.E; ++e)
    for (int64_t n = 0; n < w.N; ++n)
      for (int64_t g = 0; g < G; ++g) {
        const int64_t from = (e * w.N + source_row(e, n)) * G + g, to = (e * G + g) * w.N + n;
        h.scales[size_t(to)] = bits_of(scales[from], act);
        // weight = scale16 * (c - mid) + zero_term = scale16 * (c - zero), exactly
        if (zeros) {
          const float shift = float(s.implicit_zero() - int(zeros[from]));
          h.zero_terms[size_t(to)] = shift * rounded(scales[from], act);
        }
      }
  return h;
}

std::vector<float> kernel_bias(const QuantizedWeight& w, std::span<const int32_t> rows) {
  if (!w.has_bias()) return {};
  const float* bias = w.bias.data_as<float>();
  std::vector<float> out(size_t(w.E * w.N));
  for (int64_t e = 0; e < w.E; ++e)
    for (int64_t n = 0; n < w.N; ++n)
      out[size_t(e * w.N + n)] = bias[e * w.N + (rows.empty() ? n : rows[size_t(e * w.N + n)])];
  return out;
}

void check_tileable(const QuantizedWeight& w, DType act, const std::string& what) {
  // The oracle refuses such layers first (descriptor.cpp); prepare() called directly says why.
  check(w.N % 16 == 0, "cuda-wgmma: {} has {} output rows; the kernel needs a multiple of 16", what,
        w.N);
  check(w.K % kTileK == 0, "cuda-wgmma: {} has K = {}; the kernel needs a multiple of {}", what,
        w.K, kTileK);
  check(kernel_group(w) % kTileK == 0,
        "cuda-wgmma: {} has groups of {}; the kernel needs channelwise scales or groups of a "
        "multiple of {}",
        what, kernel_group(w), kTileK);
  const Variant variant{code_of(w.scheme), act};
  for (int tile : kTileTokens)
    check(gemm_ops(variant, tile) != nullptr,
          "cuda-wgmma: no {}-token kernel for {} codes with {} activations in this build", tile,
          name(variant.code), name(act));
}

KernelWeight upload_kernel_weight(const QuantizedWeight& w, const HostKernelWeight& h, DType act,
                                  const void* shared_codes) {
  KernelWeight k;
  k.variant = Variant{code_of(w.scheme), act};
  k.E = w.E;
  k.N = w.N;
  k.K = w.K;
  k.group_size = h.group_size;
  const GemmOps* ops = gemm_ops(k.variant, kTileTokens[0]);
  if (shared_codes) {
    k.code_data = shared_codes;
  } else {
    k.codes = to_device(h.codes);
    k.code_data = k.codes.data();
  }
  k.scales = to_device(h.scales);
  k.zero_terms = to_device(h.zero_terms);
  // Built once by the first tile's instance for all of them: the layout and stride types do not
  // depend on the token tile.
  ops->make_static_args(k);
  return k;
}

}  // namespace qmoe::cuda_wgmma
