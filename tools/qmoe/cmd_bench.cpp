// `qmoe bench [DIR | --shape H,I,E,TOPK] [--m 1,8,...]`: the MoE forward of one layer on every
// backend of a device, per token count M: median time, the fraction of this machine's floor
// (ceilings measured in the same run) and the speed-up over a plain float baseline (OpenBLAS sgemm
// on weights dequantized to f32 on the CPU; on a GPU moe_bench's cuBLAS bf16 forward and its
// ceilings, bench/gpu/layer_baseline.hpp). Table, --json, and --plot F.svg.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <set>

#include "bench_layer.hpp"
#include "command.hpp"
#include "core/check.hpp"
#include "flag_checks.hpp"
#include "forward_run.hpp"
#include "placed_tensor.hpp"
#include "progress.hpp"
#include "qmoe/checkpoint.hpp"
#include "qmoe/oracle.hpp"
#include "route/topk.hpp"
#include "sample/random_moe.hpp"
#include "scheme_flag.hpp"
#include "svg_chart.hpp"
#include "threads_flag.hpp"
#include "units.hpp"
#ifdef QMOE_BENCH_OPENBLAS
#include "backend/emulation/dense_forward.hpp"
#include "measure/cpu/baselines.hpp"
#include "measure/cpu/ceilings.hpp"
#endif
#ifdef QMOE_BENCH_CUBLAS
#include "measure/gpu/layer_baseline.hpp"
#endif

namespace qmoe::cli {
namespace {

struct BenchOptions {
  LayerSource layer;
  std::vector<int64_t> m{1, 8, 32, 128};
  std::string device = "auto";
  std::string dtype = "auto";
  std::vector<std::string> backends;  // empty: every compatible one but the emulation
  double seconds = 0.3;               // sampling time per row
  bool json = false, quiet = false;
  std::string plot;
};

// Bytes a backend must read for one expert: codes, 16-bit scales, zero points, bias.
double expert_bytes(const QuantizedExperts& x) {
  double bytes = 0;
  for (const QuantizedWeight* w : {&x.w13(), &x.w2()}) {
    const double rows = static_cast<double>(w->N);
    const double groups = static_cast<double>(w->groups());
    bytes += rows * static_cast<double>(w->code_bytes_per_row());
    bytes += rows * groups * (w->scheme.kind == WeightKind::mxfp4 ? 1 : 2);
    if (w->scheme.has_zero_points()) bytes += rows * groups;
    if (w->has_bias()) bytes += rows * 4;
  }
  return bytes;
}

// R sets of M tokens each, timed back to back, so that a forward does not find the experts it
// reads in the cache from the one before: R = ceil(240 MB / weight bytes one set touches), 2..16.
struct TokenSets {
  std::vector<Buffer> hidden, logits, topk_weights, topk_ids, out;
  double weight_bytes = 0;  // average bytes of the experts one set touches
};

TokenSets make_sets(const MoEConfig& c, double bytes_per_expert, int64_t M, DType dtype,
                    std::mt19937_64& rng) {
  const double E = static_cast<double>(c.num_experts), k = c.top_k();
  const double expected = E * (1.0 - std::pow(1.0 - k / E, static_cast<double>(M)));
  const int R =
      static_cast<int>(std::clamp(std::ceil(240e6 / (expected * bytes_per_expert)), 2.0, 16.0));
  TokenSets s;
  for (int r = 0; r < R; ++r) {
    s.hidden.emplace_back(dtype, std::initializer_list<int64_t>{M, c.hidden});
    sample::fill_normal(s.hidden.back(), rng);
    s.logits.emplace_back(DType::f32, std::initializer_list<int64_t>{M, c.num_experts});
    sample::fill_normal(s.logits.back(), rng);
    s.topk_weights.emplace_back(DType::f32, std::initializer_list<int64_t>{M, c.top_k()});
    s.topk_ids.emplace_back(DType::i32, std::initializer_list<int64_t>{M, c.top_k()});
    route_topk(c.routing, s.logits.back().data_as<float>(), M, c.num_experts,
               s.topk_weights.back().data_as<float>(), s.topk_ids.back().data_as<int32_t>());
    s.out.emplace_back(dtype, std::initializer_list<int64_t>{M, c.hidden});
    const std::span<const int32_t> ids = s.topk_ids.back().span<int32_t>();
    s.weight_bytes += static_cast<double>(std::set<int32_t>(ids.begin(), ids.end()).size()) *
                      bytes_per_expert / R;
  }
  return s;
}

struct Timing {
  double median = 0, p10 = 0, p90 = 0;
};

// Per-forward times of `pass` (one forward over every set), sampled for about `seconds`.
Timing time_passes(size_t sets, const std::function<void()>& pass, double seconds) {
  pass();  // warm-up: workspaces, threads
  std::vector<double> samples;
  const auto begin = std::chrono::steady_clock::now();
  while (
      samples.size() < 3 ||
      (samples.size() < 1000 &&
       std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count() < seconds)) {
    const auto start = std::chrono::steady_clock::now();
    pass();
    samples.push_back(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() /
        static_cast<double>(sets));
  }
  std::sort(samples.begin(), samples.end());
  const double last = static_cast<double>(samples.size() - 1);
  auto at = [&](double q) { return samples[static_cast<size_t>(q * last + 0.5)]; };
  return {at(0.5), at(0.1), at(0.9)};
}

struct Ceilings {
  double read_bytes_per_s = 0, flops_per_s = 0;  // 0: not measured in this build
  // The cpu's further memory ceilings (0 elsewhere): read_bytes_per_s is on huge pages, where the
  // packed weights sit.
  double copy_bytes_per_s = 0, read_4k_bytes_per_s = 0, copy_4k_bytes_per_s = 0;
  std::string how;
};

Ceilings measure(Device device) {
#ifdef QMOE_BENCH_OPENBLAS
  if (device.kind == DeviceKind::cpu) {
    const bench::Ceilings c = bench::measure_ceilings();
    return {c.read_gbps * 1e9,
            bench::openblas_sgemm_flops(),
            c.copy_gbps * 1e9,
            c.read_4k_gbps * 1e9,
            c.copy_4k_gbps * 1e9,
            c.to_string() +
                "; streaming over buffers far larger than the cache; OpenBLAS "
                "1024^3 sgemm"};
  }
#endif
#ifdef QMOE_BENCH_CUBLAS
  if (device.kind == DeviceKind::cuda) {
    const bench::DeviceCeilings c = bench::measure_device_ceilings(device.index);
    return {c.copy_bytes_per_s,
            c.bf16_flops_per_s,
            0,
            0,
            0,
            "SM copy kernel 1 GiB -> 1 GiB (bytes read + written per second, as moe_bench); "
            "cuBLAS 8192^3 bf16 matmul"};
  }
#endif
  (void)device;
  return {0, 0, 0, 0, 0, "not measured: this build has no benchmark library for the device"};
}

// The plain float forward a backend's speed-up is measured against, on the same token sets.
class FloatBaseline {
 public:
  virtual ~FloatBaseline() = default;
  virtual std::string name() const = 0;
  virtual void use(TokenSets& sets) = 0;  // the sets of the next M
  virtual void pass() = 0;                // one forward over every set, finished on return
  virtual Buffer first_output() const = 0;

 protected:
  TokenSets* sets_ = nullptr;
};

#ifdef QMOE_BENCH_OPENBLAS
class OpenblasBaseline final : public FloatBaseline {
 public:
  OpenblasBaseline(const QuantizedExperts& experts, const MoEConfig& config)
      : dense_(dequantize(experts)), config_(config) {}
  std::string name() const override { return "openblas-f32"; }
  void use(TokenSets& sets) override { sets_ = &sets; }
  void pass() override {
    for (size_t i = 0; i < sets_->hidden.size(); ++i)
      bench::openblas_moe_forward(
          dense_, config_,
          RoutedBatch{sets_->hidden[i].view(), sets_->topk_weights[i].view(),
                      sets_->topk_ids[i].view(), sets_->out[i].view()});
  }
  Buffer first_output() const override { return sets_->out[0].clone(); }

 private:
  DequantizedExperts dense_;
  MoEConfig config_;
};
#endif

#ifdef QMOE_BENCH_CUBLAS
class CublasBaseline final : public FloatBaseline {
 public:
  CublasBaseline(const QuantizedExperts& experts, const MoEConfig& config, int device)
      : cublas_(config, experts, device) {}
  std::string name() const override { return "cublas-bf16"; }
  void use(TokenSets& sets) override {
    sets_ = &sets;
    cublas_.set_tokens(sets.hidden, sets.topk_weights, sets.topk_ids);
  }
  void pass() override { cublas_.run_sets(); }
  Buffer first_output() const override {
    Buffer out(DType::bf16, sets_->out[0].shape());
    cublas_.copy_out(0, out);
    return out;
  }

 private:
  bench::CublasLayerBaseline cublas_;
};
#endif

// This device's baseline, or null with the reason in `why_not`.
std::unique_ptr<FloatBaseline> make_baseline(const QuantizedExperts& experts,
                                             const MoEConfig& config, Device device, DType dtype,
                                             std::string& why_not) {
#ifdef QMOE_BENCH_OPENBLAS
  if (device.kind == DeviceKind::cpu) {
    if (dtype == DType::f32) return std::make_unique<OpenblasBaseline>(experts, config);
    why_not = fmt::format("the OpenBLAS baseline runs f32 activations, not {}", name(dtype));
    return nullptr;
  }
#endif
#ifdef QMOE_BENCH_CUBLAS
  if (device.kind == DeviceKind::cuda) {
    why_not = bench::cublas_baseline_unfit(config, dtype);
    if (why_not.empty()) return std::make_unique<CublasBaseline>(experts, config, device.index);
    why_not = "the cuBLAS baseline does not fit: " + why_not;
    return nullptr;
  }
#endif
  (void)experts, (void)config, (void)dtype;
  why_not = fmt::format("this build has no float baseline for {}", to_string(device));
  return nullptr;
}

struct Row {
  std::string backend;
  int64_t M = 0;
  Timing t;
  double floor_s = 0, weight_bytes = 0, flops = 0;
  double speedup = NAN;  // baseline time / this time
  double error = NAN;    // relative to the baseline's output on the same tokens
  std::string failure;
};

void print_table(const std::vector<Row>& rows, const Ceilings& ceil, const std::string& baseline) {
  fmt::print("{:<14} {:>6}  {:>28}  {:>10}  {:>7}  {:>9}  {:>10}\n", "backend", "M",
             "time (p10-p90)", "floor", "÷floor", "GB/s",
             baseline.empty() ? "×baseline" : fmt::format("×{}", baseline));
  for (const Row& r : rows) {
    if (!r.failure.empty()) {
      fmt::print("{:<14} {:>6}  FAIL: {}\n", r.backend, r.M, r.failure);
      continue;
    }
    fmt::print("{:<14} {:>6}  {:>28}  {:>10}  {:>7}  {:>9.1f}  {:>10}\n", r.backend, r.M,
               fmt::format("{} ({}-{})", format_seconds(r.t.median), format_seconds(r.t.p10),
                           format_seconds(r.t.p90)),
               ceil.read_bytes_per_s > 0 ? format_seconds(r.floor_s) : "-",
               ceil.read_bytes_per_s > 0 ? fmt::format("{:.2f}", r.floor_s / r.t.median) : "-",
               r.weight_bytes / r.t.median / 1e9,
               std::isnan(r.speedup) ? "-" : fmt::format("{:.2f}", r.speedup));
  }
}

nlohmann::ordered_json to_json(const std::vector<Row>& rows, const Ceilings& ceil,
                               const std::string& device, const std::string& layer,
                               const std::string& baseline, const std::string& why_no_baseline) {
  nlohmann::ordered_json j;
  j["device"] = device;
  j["layer"] = layer;
  j["ceilings"] = {{"read_bytes_per_s", ceil.read_bytes_per_s},
                   {"flops_per_s", ceil.flops_per_s},
                   {"how", ceil.how}};
  if (ceil.copy_bytes_per_s > 0) {
    j["ceilings"]["copy_bytes_per_s"] = ceil.copy_bytes_per_s;
    j["ceilings"]["read_4k_pages_bytes_per_s"] = ceil.read_4k_bytes_per_s;
    j["ceilings"]["copy_4k_pages_bytes_per_s"] = ceil.copy_4k_bytes_per_s;
  }
  j["baseline"] = baseline.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(baseline);
  if (baseline.empty()) j["why_no_baseline"] = why_no_baseline;
  j["rows"] = nlohmann::ordered_json::array();
  for (const Row& r : rows) {
    nlohmann::ordered_json row = {{"backend", r.backend}, {"m", r.M}};
    if (!r.failure.empty()) {
      row["error"] = r.failure;
    } else {
      row["median_s"] = r.t.median;
      row["p10_s"] = r.t.p10;
      row["p90_s"] = r.t.p90;
      row["weight_bytes"] = r.weight_bytes;
      row["flops"] = r.flops;
      if (ceil.read_bytes_per_s > 0) {
        row["floor_s"] = r.floor_s;
        row["fraction_of_floor"] = r.floor_s / r.t.median;
      }
      if (!std::isnan(r.speedup)) row["speedup_over_baseline"] = r.speedup;
      if (!std::isnan(r.error)) row["error_vs_baseline"] = r.error;
    }
    j["rows"].push_back(row);
  }
  return j;
}

void write_plot(const std::string& path, const std::vector<Row>& rows, const std::string& title) {
  std::vector<Series> series;
  for (const Row& r : rows) {
    if (!r.failure.empty()) continue;
    auto it = std::find_if(series.begin(), series.end(),
                           [&](const Series& s) { return s.name == r.backend; });
    if (it == series.end()) it = series.insert(series.end(), Series{r.backend, {}, {}});
    it->x.push_back(static_cast<double>(r.M));
    it->y.push_back(r.t.median * 1e6);
  }
  std::ofstream out(path, std::ios::trunc);
  if (!out.good()) fail("{}: cannot create", path);
  out << log_log_chart_svg(title, "tokens per forward (M)", "time per forward (µs)", series);
  if (!out.good()) fail("{}: write failed", path);
}

void run_bench(const BenchOptions& o) {
  const Device device = machine_device(o.device);
  const DeviceDesc desc = device.kind == DeviceKind::cpu ? host_cpu() : query_device(device);
  const DType dtype = activation_dtype(o.dtype, device);
  BenchLayer layer = make_bench_layer(o.layer);
  const QuantizedExperts& experts = *layer.experts;
  const MoEConfig& config = layer.config;
  LayerDesc layer_desc = describe(experts, config);
  layer_desc.activation_dtype = dtype;
  std::vector<std::string> backends = o.backends;
  if (backends.empty()) {
    for (const Verdict& v : evaluate(layer_desc, desc).verdicts)
      if (v.compatible && v.backend != "emulation") backends.push_back(v.backend);
  }
  if (backends.empty())
    throw ProblemFound{fmt::format("no backend can run {} on {}; try --backend emulation",
                                   layer_desc.to_string(), desc.to_string())};
  const std::string title =
      fmt::format("{}: {} on {}", layer.source, layer_desc.to_string(), desc.to_string());
  if (!o.json) fmt::print("{}\n", title);

  std::vector<std::unique_ptr<MoE>> moes;
  for (const std::string& b : backends)
    moes.push_back(std::make_unique<MoE>(config, experts, b, device));
  std::string why_no_baseline;
  const std::unique_ptr<FloatBaseline> baseline =
      make_baseline(experts, config, device, dtype, why_no_baseline);
  const std::string baseline_name = baseline ? baseline->name() : "";
  const Ceilings ceil = measure(device);
  if (!o.json && ceil.read_bytes_per_s > 0) {
    fmt::print("ceilings (this run): memory {}/s, {:.0f} GFLOP/s ({})\n",
               format_bytes(static_cast<int64_t>(ceil.read_bytes_per_s)), ceil.flops_per_s / 1e9,
               ceil.how);
  }
  if (!o.json && !baseline) fmt::print("no baseline: {}\n", why_no_baseline);

  const double bytes_per_expert = expert_bytes(experts);
  std::mt19937_64 rng(o.layer.seed + 1);
  std::vector<Row> rows;
  Progress progress("benchmarking", static_cast<int64_t>(o.m.size()), !o.quiet && !o.json);
  for (const int64_t M : o.m) {
    TokenSets sets = make_sets(config, bytes_per_expert, M, dtype, rng);
    const double flops = 2.0 * static_cast<double>(M * config.top_k()) *
                         static_cast<double>(config.w13_rows() * config.hidden +
                                             config.hidden * config.intermediate);
    double floor_s = 0;
    if (ceil.read_bytes_per_s > 0)
      floor_s = std::max(sets.weight_bytes / ceil.read_bytes_per_s, flops / ceil.flops_per_s);
    std::optional<double> baseline_s;
    Buffer baseline_out;  // the baseline's output for set 0, to check every backend against
    if (baseline) {
      Row r{baseline_name, M, {}, floor_s, sets.weight_bytes, flops, 1.0, 0.0, {}};
      try {
        baseline->use(sets);
        r.t = time_passes(
            sets.hidden.size(), [&] { baseline->pass(); }, o.seconds);
        baseline_s = r.t.median;
        baseline_out = baseline->first_output();
      } catch (const Error& e) {
        r.failure = e.what();
      }
      rows.push_back(r);
    }
    for (size_t b = 0; b < moes.size(); ++b) {
      Row r{backends[b], M, {}, floor_s, sets.weight_bytes, flops, NAN, NAN, {}};
      try {
        std::vector<PlacedTensor> hidden, logits, out;
        for (size_t i = 0; i < sets.hidden.size(); ++i) {
          hidden.emplace_back(sets.hidden[i], device);
          logits.emplace_back(sets.logits[i], device);
          out.emplace_back(sets.out[i], device);
        }
        r.t = time_passes(
            sets.hidden.size(),
            [&] {
              for (size_t i = 0; i < hidden.size(); ++i)
                moes[b]->forward(hidden[i].view(), logits[i].view(), out[i].view());
              synchronize(device);
            },
            o.seconds);
        if (baseline_s) r.speedup = *baseline_s / r.t.median;
        if (!baseline_out.empty()) {
          Buffer result(sets.out[0].dtype(), sets.out[0].shape());
          out[0].copy_to(result);
          r.error = sample::relative_error(result, baseline_out);
          if (!(r.error < error_bound(dtype)))
            r.failure = fmt::format("error {:.2e} vs the baseline", r.error);
        }
      } catch (const Error& e) {
        r.failure = e.what();
      }
      rows.push_back(r);
    }
    progress.step();
  }
  progress.clear();
  if (o.json) {
    fmt::print("{}\n", to_json(rows, ceil, desc.to_string(), layer_desc.to_string(), baseline_name,
                               why_no_baseline)
                           .dump(2));
  } else {
    print_table(rows, ceil, baseline_name);
  }
  if (!o.plot.empty()) {
    write_plot(o.plot, rows,
               fmt::format("{}, E={} H={} I={} top-{}, on {}", to_string(experts.w13().scheme),
                           config.num_experts, config.hidden, config.intermediate, config.top_k(),
                           to_string(device)));
    if (!o.json) fmt::print("wrote {}\n", o.plot);
  }
  for (const Row& r : rows)
    if (!r.failure.empty()) throw ProblemFound{fmt::format("{} failed at M = {}", r.backend, r.M)};
}

void add_bench(CLI::App& root) {
  auto o = std::make_shared<BenchOptions>();
  CLI::App* cmd = root.add_subcommand(
      "bench", "Time one MoE layer on every backend of a device against a float baseline");
  add_threads_flag(*cmd);
  add_layer_flags(*cmd, o->layer);
  cmd->add_option("--m", o->m, "Token counts, e.g. 1,8,32,128")->delimiter(',')->check(at_least(1));
  cmd->add_option("--device", o->device, "auto (a GPU when present), cpu, cuda or cuda:N")
      ->capture_default_str();
  cmd->add_option("--dtype", o->dtype, "Activation dtype: auto, f32, bf16 or f16")
      ->capture_default_str();
  cmd->add_option("--backend", o->backends,
                  "Backends to time, e.g. cpu,emulation (default: every compatible one but the "
                  "emulation)")
      ->delimiter(',')
      ->check(backend_name());
  cmd->add_option("--seconds", o->seconds, "Sampling time per row")
      ->capture_default_str()
      ->check(positive_number());
  cmd->add_flag("--json", o->json, "Print JSON instead of a table");
  cmd->add_option("--plot", o->plot, "Write an SVG chart of time against M per backend");
  cmd->add_flag("--quiet", o->quiet, "No progress line");
  cmd->callback([o] { run_bench(*o); });
}

const bool registered = register_command(&add_bench);

}  // namespace
}  // namespace qmoe::cli
