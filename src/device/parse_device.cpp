#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>

#include "core/check.hpp"
#include "qmoe/device.hpp"

namespace qmoe {

namespace {

struct KnownGpu {
  std::string_view name;
  int compute_capability;
  int multiprocessors;
};

// GPUs a user is likely to ask about, by their common short names.
constexpr std::array<KnownGpu, 9> kKnownGpus{{
    {"a100", 80, 108},
    {"a10", 86, 72},
    {"a40", 86, 84},
    {"l4", 89, 58},
    {"l40s", 89, 142},
    {"h100", 90, 132},
    {"h200", 90, 132},
    {"gh200", 90, 132},
    {"b200", 100, 148},
}};

constexpr std::array<CpuFeature, 7> kCpuFeatures{
    CpuFeature::x86_64,   CpuFeature::avx2,       CpuFeature::fma,       CpuFeature::avx512f,
    CpuFeature::avx512bw, CpuFeature::avx512vnni, CpuFeature::avx512bf16};

std::string accepted_forms() {
  std::string gpus;
  for (const KnownGpu& g : kKnownGpus) gpus += fmt::format(", {}", g.name);
  return fmt::format(
      "cpu, cpu:FEATURE,... (x86-64, avx2, fma, avx512f, avx512bw, avx512vnni, "
      "avx512bf16, or generic), cuda, cuda:N, sm_XY or sm_XYa (e.g. sm_80, sm_90a){}",
      gpus);
}

DeviceDesc described_cpu(std::string_view list) {
  DeviceDesc d;
  d.kind = DeviceKind::cpu;
  d.name = fmt::format("cpu:{}", list);
  d.described = true;
  while (!list.empty()) {
    const size_t comma = list.find(',');
    const std::string_view word = list.substr(0, comma);
    list = comma == std::string_view::npos ? std::string_view{} : list.substr(comma + 1);
    if (word == "generic" || word.empty()) continue;
    bool known = false;
    for (CpuFeature f : kCpuFeatures) {
      if (name(f) != word && !(f == CpuFeature::x86_64 && word == "x86_64")) continue;
      if (!d.has(f)) d.cpu_features.push_back(f);
      known = true;
    }
    check(known, "unknown CPU feature '{}' in --device (accepted: {})", word, accepted_forms());
  }
  // Any x86 extension implies an x86-64 CPU.
  if (!d.cpu_features.empty() && !d.has(CpuFeature::x86_64))
    d.cpu_features.insert(d.cpu_features.begin(), CpuFeature::x86_64);
  return d;
}

DeviceDesc described_gpu(std::string name, int compute_capability, int multiprocessors) {
  DeviceDesc d;
  d.kind = DeviceKind::cuda;
  d.name = std::move(name);
  d.described = true;
  d.compute_capability = compute_capability;
  d.multiprocessors = multiprocessors;
  return d;
}

// "sm_90a" -> 90: the 'a' suffix names a compile target (arch-specific instructions such as
// wgmma), not a different device; an sm_90a binary runs on compute capability 9.0.
// Compute capabilities NVIDIA has shipped; anything else (sm_999, sm_91) is a typo.
constexpr std::array<int, 20> kKnownArchs{50, 52, 53, 60, 61,  62,  70,  72,  75,  80,
                                          86, 87, 89, 90, 100, 101, 103, 110, 120, 121};

bool parse_sm(std::string_view text, int& compute_capability) {
  if (!text.starts_with("sm_")) return false;
  std::string_view digits = text.substr(3);
  if (digits.ends_with('a')) digits.remove_suffix(1);
  const auto [end, ec] =
      std::from_chars(digits.data(), digits.data() + digits.size(), compute_capability);
  if (ec != std::errc{} || end != digits.data() + digits.size()) return false;
  check(std::find(kKnownArchs.begin(), kKnownArchs.end(), compute_capability) != kKnownArchs.end(),
        "unknown GPU architecture '{}' (known: sm_{})", text, fmt::join(kKnownArchs, ", sm_"));
  return true;
}

}  // namespace

DeviceDesc parse_device(std::string_view given) {
  std::string lowered(given);
  std::transform(lowered.begin(), lowered.end(), lowered.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  const std::string_view text = lowered;
  if (text == "cpu") return host_cpu();
  if (text.starts_with("cpu:")) return described_cpu(text.substr(4));
  if (text == "cuda" || text.starts_with("cuda:")) {
    int index = 0;
    if (text.size() > 5) {
      const auto [end, ec] = std::from_chars(text.data() + 5, text.data() + text.size(), index);
      check(ec == std::errc{} && end == text.data() + text.size(),
            "--device '{}': expected cuda:N with N a device number", text);
    }
    check(!cuda_devices().empty(),
          "--device {}: this machine shows no CUDA device; describe one instead (sm_80, sm_90a, "
          "a100, h100, ...)",
          text);
    return query_device(Device{DeviceKind::cuda, index});
  }
  int cc = 0;
  if (parse_sm(text, cc)) return described_gpu(std::string(text), cc, 0);
  for (const KnownGpu& g : kKnownGpus)
    if (g.name == text)
      return described_gpu(std::string(text), g.compute_capability, g.multiprocessors);
  fail("unknown device '{}' (accepted: {})", text, accepted_forms());
}

}  // namespace qmoe
