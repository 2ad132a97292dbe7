// Checkpoint loading: how fast Checkpoint::load_layer turns a GPTQ checkpoint into canonical
// experts, and how much memory it needs doing so (docs/benchmarking.md).
//   bench_load generate DIR [GB]   writes a GPTQ int4 g128 checkpoint of about GB gigabytes
//                                  (default 2): layers of 64 experts, H 2048, I 1024, f16 scales
//   bench_load load DIR            loads every MoE layer once, one after the other (each dropped
//                                  before the next), in a fresh process so the peak is the loader's
// `load` prints the bytes of expert tensors read, the time, MB/s (wall and per CPU second, with the
// load average), the process's peak resident memory and that peak as a multiple of the largest
// canonical layer. Run `load` right after
// `generate` (or twice) so the files come from the page cache.
#include <fmt/format.h>
#include <sys/resource.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "qmoe/checkpoint.hpp"
#include "qmoe/error.hpp"
#include "sample/random_moe.hpp"

namespace qmoe {
namespace {

constexpr int64_t kE = 64, kH = 2048, kI = 1024;

int generate(const std::string& dir, double gigabytes) {
  const QuantScheme scheme{.bits = 4, .group_size = 128};
  MoEConfig config;
  config.num_experts = kE;
  config.hidden = kH;
  config.intermediate = kI;
  config.routing.top_k = 8;
  std::mt19937_64 rng(5);
  QuantizedWeight w13 = sample::random_codes_weight(kE, 2 * kI, kH, scheme, rng);
  QuantizedWeight w2 = sample::random_codes_weight(kE, kH, kI, scheme, rng);
  sample::round_to_dtype(w13.scales, DType::f16);
  sample::round_to_dtype(w2.scales, DType::f16);
  const QuantizedExperts layer(std::move(w13), std::move(w2));
  const double layer_bytes =
      static_cast<double>(layer.w13().codes.nbytes() + layer.w2().codes.nbytes()) * 1.07;
  const int layers = std::max(1, static_cast<int>(gigabytes * 1e9 / layer_bytes + 0.5));
  std::vector<QuantizedExperts> all;
  for (int l = 0; l < layers; ++l) all.push_back(layer.clone());
  write_checkpoint(dir, config, all,
                   WriteOptions{.format = CheckpointFormat::gptq, .max_shard_bytes = 1 << 30});
  fmt::print("wrote {}: {} layers of E {} H {} I {}, int4 g128\n", dir, layers, kE, kH, kI);
  return 0;
}

int64_t canonical_bytes(const QuantizedExperts& x) {
  int64_t bytes = 0;
  for (const QuantizedWeight* w : {&x.w13(), &x.w2()})
    bytes += w->codes.nbytes() + w->scales.nbytes() + w->zeros.nbytes() + w->g_idx.nbytes() +
             w->bias.nbytes();
  return bytes;
}

int64_t peak_resident_bytes() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<int64_t>(usage.ru_maxrss) * 1024;
}

// User + system CPU seconds of every thread of the process so far: on a shared machine the wall
// time depends on who else runs, the CPU time much less.
double cpu_seconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  auto seconds = [](const timeval& t) {
    return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) * 1e-6;
  };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

int load(const std::string& dir) {
  const Checkpoint ckpt = Checkpoint::open(dir);
  const int64_t before = peak_resident_bytes();
  int64_t file_bytes = 0, largest = 0;
  const double cpu_start = cpu_seconds();
  const auto start = std::chrono::steady_clock::now();
  for (int layer : ckpt.moe_layers()) {
    const QuantizedExperts x = ckpt.load_layer(layer);
    file_bytes += ckpt.layer_bytes(layer);
    largest = std::max(largest, canonical_bytes(x));
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double cpu = cpu_seconds() - cpu_start;
  const int64_t peak = peak_resident_bytes();
  double load[1] = {NAN};
  getloadavg(load, 1);
  const double mb = static_cast<double>(file_bytes) / 1e6;
  fmt::print(
      "{}: {} layers, {:.0f} MB of expert tensors in {:.2f} s = {:.0f} MB/s; {:.2f} CPU s = {:.0f} "
      "MB per CPU second; load average {:.2f}; peak resident {:.0f} MB ({:.0f} MB before loading), "
      "largest canonical layer {:.0f} MB: peak = {:.2f}x the layer\n",
      dir, ckpt.moe_layers().size(), mb, seconds, mb / seconds, cpu, mb / cpu, load[0],
      static_cast<double>(peak) / 1e6, static_cast<double>(before) / 1e6,
      static_cast<double>(largest) / 1e6, static_cast<double>(peak) / static_cast<double>(largest));
  return 0;
}

}  // namespace
}  // namespace qmoe

int main(int argc, char** argv) {
  try {
    const std::string mode = argc > 1 ? argv[1] : "";
    if (mode == "generate" && (argc == 3 || argc == 4))
      return qmoe::generate(argv[2], argc == 4 ? std::stod(argv[3]) : 2.0);
    if (mode == "load" && argc == 3) return qmoe::load(argv[2]);
    fmt::print(stderr, "usage: {0} generate DIR [GB] | {0} load DIR\n", argv[0]);
    return 2;
  } catch (const qmoe::Error& e) {
    fmt::print(stderr, "bench_load: {}\n", e.what());
    return 1;
  }
}
