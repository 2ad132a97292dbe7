// The cpu backend's MoE forward on one layer, against ceilings and baselines measured in the same
// run (docs/benchmarking.md, CPU section):
//   bench_cpu_moe [model ...] [--m=1,16] [--dtype=f32|bf16] [--busy] [--cpu-only]
//     models: qwen3 (H 2048, I 768, E 128, top-8), mixtral-half (H 4096, I 7168, E 8, top-2),
//     gpt-oss-20b (H 2880, I 2880, E 32, top-4, MXFP4; only when named);
//     --m: token counts (default 1,4,16,64,256); --dtype: activations (default bf16);
//     --busy: also time each row with a competing busy loop on one more thread (what a forward
//     costs on a machine where another process takes a core); --cpu-only: skip the baselines (a
//     quick look while tuning; the recorded runs keep them)
// Weights: int4, group 128, symmetric, values (q - 8) * s with s ~ 1/(4.6 sqrt K) (gpt-oss-20b:
// MXFP4, random e2m1 codes, power-of-two scales near 1/(3 sqrt K)); activations
// N(0, 1); routing softmax top-k renormalized from N(0, 1) logits. Cold: R routing sets
// (fresh x and routing each), R = ceil(240 MB / weight bytes one set touches) clamped to [2, 16],
// timed back to back, so the experts a forward reads were not read by the previous few.
// Per row: median time per forward (p10-p90), packed weight bytes touched (codes + scales as the
// kernel reads them), bandwidth as a fraction of a memcpy copy and a streaming read measured just
// before the row, effective GFLOP/s (6 M k H I), and the time ratios to the emulation backend and
// to OpenBLAS sgemm on pre-dequantized f32 weights.
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "backend/cpu/cpu_backend.hpp"
#include "backend/cpu/cpu_experts.hpp"
#include "backend/cpu/isa.hpp"
#include "backend/cpu/thread_pool.hpp"
#include "backend/emulation/dense_forward.hpp"
#include "measure/cpu/baselines.hpp"
#include "measure/cpu/ceilings.hpp"
#include "route/topk.hpp"
#include "sample/random_moe.hpp"

namespace qmoe::bench {
namespace {

using Clock = std::chrono::steady_clock;

struct Model {
  const char* name;
  int64_t E, H, I;
  int top_k;
  bool mxfp4 = false;  // else int4 g128 sym
};

constexpr Model kModels[] = {{"qwen3", 128, 2048, 768, 8},
                             {"mixtral-half", 8, 4096, 7168, 2},
                             {"gpt-oss-20b", 32, 2880, 2880, 4, true}};

struct Options {
  std::vector<std::string> models;
  std::vector<int64_t> token_counts{1, 4, 16, 64, 256};
  DType dtype = DType::bf16;
  bool busy = false;
  bool baselines = true;
};

// A thread spinning on one core for as long as it lives: the other process of a busy machine.
class BusyLoop {
 public:
  BusyLoop()
      : spinner_([this] {
          uint64_t n = 0;
          while (!stop_.load(std::memory_order_relaxed)) n = n * 6364136223846793005u + 1;
          sink_ = n;
        }) {}
  ~BusyLoop() {
    stop_ = true;
    spinner_.join();
  }

 private:
  std::atomic<bool> stop_{false};
  volatile uint64_t sink_ = 0;
  std::thread spinner_;
};
constexpr int kGroup = 128;

// "0.52 0.58 0.59" from /proc/loadavg: how many other processes compete for the cores.
std::string load_average() {
  std::FILE* f = std::fopen("/proc/loadavg", "r");
  if (!f) return "unknown";
  char line[128] = {};
  const bool read = std::fgets(line, sizeof line, f) != nullptr;
  std::fclose(f);
  const std::string s = read ? line : "unknown";
  return s.substr(0, s.find(' ', s.find(' ', s.find(' ') + 1) + 1));  // the 1, 5, 15 min ones
}

struct RoutingSet {
  Buffer hidden, topk_weights, topk_ids, out;
  int64_t experts_touched = 0;
};

struct Timing {
  double median_s = 0, p10_s = 0, p90_s = 0;
};

// Runs `forward(set)` over all sets back to back per sample; per-forward times of the samples.
Timing time_rotation(std::vector<RoutingSet>& sets, const std::function<void(RoutingSet&)>& forward,
                     double min_seconds, int min_samples, int max_samples) {
  for (RoutingSet& s : sets) forward(s);  // warm-up: page in workspaces, spin up threads
  std::vector<double> samples;
  const auto begin = Clock::now();
  while (static_cast<int>(samples.size()) < max_samples &&
         (static_cast<int>(samples.size()) < min_samples ||
          std::chrono::duration<double>(Clock::now() - begin).count() < min_seconds)) {
    const auto start = Clock::now();
    for (RoutingSet& s : sets) forward(s);
    samples.push_back(std::chrono::duration<double>(Clock::now() - start).count() /
                      static_cast<double>(sets.size()));
  }
  std::sort(samples.begin(), samples.end());
  const double last = static_cast<double>(samples.size() - 1);
  auto at = [&](double q) { return samples[static_cast<size_t>(q * last + 0.5)]; };
  return {at(0.5), at(0.1), at(0.9)};
}

void run_model(const Model& m, const Options& options) {
  std::mt19937_64 rng(7);
  MoEConfig config;
  config.num_experts = m.E;
  config.hidden = m.H;
  config.intermediate = m.I;
  config.routing.top_k = m.top_k;
  const auto t0 = Clock::now();
  const QuantScheme scheme = m.mxfp4 ? QuantScheme{.kind = WeightKind::mxfp4, .group_size = 32}
                                     : QuantScheme{.bits = 4, .group_size = kGroup};
  const QuantizedExperts experts(sample::random_codes_weight(m.E, 2 * m.I, m.H, scheme, rng),
                                 sample::random_codes_weight(m.E, m.H, m.I, scheme, rng));
  const Backend& cpu = cpu_backend();
  const std::unique_ptr<PreparedExperts> prepared = cpu.prepare(experts, config, Device{});
  const auto& packed = static_cast<const cpu::CpuExperts&>(*prepared);
  const auto t1 = Clock::now();
  const DequantizedExperts dense = options.baselines ? dequantize(experts) : DequantizedExperts{};
  const auto t2 = Clock::now();
  const double expert_bytes =
      static_cast<double>(packed.w13.bytes_per_expert() + packed.w2.bytes_per_expert());
  fmt::print("\n### {} (H {}, I {}, E {}, top-{}), {}, {} activations\n", m.name, m.H, m.I, m.E,
             m.top_k, to_string(scheme), name(options.dtype));
  fmt::print(
      "make + prepare {:.1f} s, dequantize for baselines {:.1f} s; packed {:.2f} MB per "
      "expert\n\n",
      std::chrono::duration<double>(t1 - t0).count(),
      std::chrono::duration<double>(t2 - t1).count(), expert_bytes / 1e6);
  fmt::print("load average (1/5/15 min) before the rows: {}\n\n", load_average());
  fmt::print(
      "| M | R | cpu µs (p10-p90) | weights MB | GB/s | ÷read | GFLOP/s | busy µs | ×busy | "
      "read GB/s | read 4K GB/s | copy GB/s | copy 4K GB/s | emulation µs | ×emul | "
      "OpenBLAS µs | ×BLAS | err vs BLAS |\n");
  fmt::print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");

  for (const int64_t M : options.token_counts) {
    // Experts one set touches, estimated for R, then counted exactly per set.
    const double E = static_cast<double>(m.E), k = m.top_k, tokens = static_cast<double>(M);
    const double expected_experts = E * (1.0 - std::pow(1.0 - k / E, tokens));
    const int R = static_cast<int>(
        std::clamp(std::ceil(240e6 / (expected_experts * expert_bytes)), 2.0, 16.0));
    std::vector<RoutingSet> sets(static_cast<size_t>(R));
    double bytes = 0;
    for (RoutingSet& s : sets) {
      s.hidden = Buffer(options.dtype, {M, m.H});
      sample::fill_normal(s.hidden, rng);
      Buffer logits(DType::f32, {M, m.E});
      sample::fill_normal(logits, rng);
      s.topk_weights = Buffer(DType::f32, {M, m.top_k});
      s.topk_ids = Buffer(DType::i32, {M, m.top_k});
      route_topk(config.routing, logits.data_as<float>(), M, m.E, s.topk_weights.data_as<float>(),
                 s.topk_ids.data_as<int32_t>());
      s.out = Buffer(options.dtype, {M, m.H});
      const std::set<int32_t> touched(s.topk_ids.span<int32_t>().begin(),
                                      s.topk_ids.span<int32_t>().end());
      bytes += static_cast<double>(touched.size()) * expert_bytes / R;
    }
    auto batch = [](RoutingSet& s) {
      return RoutedBatch{s.hidden.view(), s.topk_weights.view(), s.topk_ids.view(), s.out.view()};
    };

    // Numerics first: the cpu backend against the OpenBLAS baseline on set 0.
    double err = NAN;
    if (options.baselines) {
      cpu.run(*prepared, config, batch(sets[0]));
      const Buffer cpu_out = sets[0].out.clone();
      openblas_moe_forward(dense, config, batch(sets[0]));
      err = sample::relative_error(cpu_out, sets[0].out);
    }

    const Ceilings ceil = measure_ceilings();
    auto forward = [&](RoutingSet& s) { cpu.run(*prepared, config, batch(s)); };
    const Timing t = time_rotation(sets, forward, 1.0, 5, 1000);
    Timing busy{NAN, NAN, NAN};
    if (options.busy) {
      const BusyLoop competitor;
      busy = time_rotation(sets, forward, 1.0, 5, 1000);
    }
    Timing blas{NAN, NAN, NAN}, emul{NAN, NAN, NAN};
    if (options.baselines) {
      blas = time_rotation(
          sets, [&](RoutingSet& s) { openblas_moe_forward(dense, config, batch(s)); }, 0.5, 3,
          1000);
      std::vector<RoutingSet> one_set(1);
      one_set[0] = std::move(sets[0]);
      emul = time_rotation(
          one_set, [&](RoutingSet& s) { dense_moe_forward<float>(dense, config, batch(s)); }, 0.0,
          1, 1);
    }

    const double gbps = bytes / t.median_s / 1e9;
    const double gflops = 6.0 * tokens * k * static_cast<double>(m.H * m.I) / t.median_s / 1e9;
    fmt::print(
        "| {} | {} | {:.0f} ({:.0f}-{:.0f}) | {:.1f} | {:.1f} | {:.2f} | {:.0f} | {:.0f} | {:.2f} "
        "| {:.1f} | {:.1f} | {:.1f} | {:.1f} | {:.0f} | {:.0f} | {:.0f} | {:.2f} | {:.1e} |\n",
        M, R, t.median_s * 1e6, t.p10_s * 1e6, t.p90_s * 1e6, bytes / 1e6, gbps,
        gbps / ceil.read_gbps, gflops, busy.median_s * 1e6, busy.median_s / t.median_s,
        ceil.read_gbps, ceil.read_4k_gbps, ceil.copy_gbps, ceil.copy_4k_gbps, emul.median_s * 1e6,
        emul.median_s / t.median_s, blas.median_s * 1e6, blas.median_s / t.median_s, err);
    std::fflush(stdout);
  }
  fmt::print("\nload average after the rows: {}\n", load_average());
}

}  // namespace
}  // namespace qmoe::bench

int main(int argc, char** argv) {
  using namespace qmoe;
  bench::Options options;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--cpu-only") {
      options.baselines = false;
    } else if (arg == "--busy") {
      options.busy = true;
    } else if (arg == "--dtype=f32" || arg == "--dtype=bf16") {
      options.dtype = arg == "--dtype=f32" ? DType::f32 : DType::bf16;
    } else if (arg.rfind("--m=", 0) == 0) {
      options.token_counts.clear();
      for (size_t at = 4; at < arg.size();) {
        const size_t comma = std::min(arg.find(',', at), arg.size());
        options.token_counts.push_back(std::stoll(arg.substr(at, comma - at)));
        at = comma + 1;
      }
    } else if (arg.rfind("--", 0) != 0 &&
               std::any_of(std::begin(bench::kModels), std::end(bench::kModels),
                           [&](const bench::Model& m) { return arg == m.name; })) {
      options.models.push_back(arg);
    } else {
      fmt::print(stderr,
                 "bench_cpu_moe: unknown argument '{}' (models: qwen3, mixtral-half, gpt-oss-20b; "
                 "flags: "
                 "--m=1,16 --dtype=f32|bf16 --busy --cpu-only)\n",
                 arg);
      return 2;
    }
  }
  fmt::print("cpu backend: ISA {}, {} threads (not pinned); baseline {}\n",
             cpu::name(cpu::selected_isa()), cpu::ThreadPool::instance().threads(),
             bench::openblas_description());
  for (const bench::Model& m : bench::kModels)
    if ((options.models.empty() && !m.mxfp4) ||
        std::find(options.models.begin(), options.models.end(), m.name) != options.models.end())
      bench::run_model(m, options);
  return 0;
}
