// `qmoe tune [DIR | --shape H,I,E,TOPK] [--m 1,8,...]`: on a GPU whose plan has a large-batch
// backend (cuda-wgmma on sm_90), times the plan's two backends at each token count and stores the
// crossover (the smallest M from which the large-batch backend is faster at every larger M of the
// sweep) in the tune file that MoE reads (src/moe/tuning.hpp), for this device and layer.
#include <fmt/format.h>

#include <algorithm>
#include <random>

#include "bench_layer.hpp"
#include "command.hpp"
#include "flag_checks.hpp"
#include "forward_run.hpp"
#include "moe/tuning.hpp"
#include "qmoe/moe.hpp"
#include "qmoe/oracle.hpp"
#include "sample/random_moe.hpp"
#include "units.hpp"

namespace qmoe::cli {
namespace {

struct TuneOptions {
  LayerSource layer;
  std::vector<int64_t> m{1, 8, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192};
  std::string device = "auto";
  std::string dtype = "auto";
  std::string file;  // empty: tune_file_path()
  int repeats = 10;
  bool dry_run = false;
};

void run_tune(const TuneOptions& o) {
  const Device device = machine_device(o.device);
  if (device.kind != DeviceKind::cuda)
    usage_error("tune measures GPU backends: give --device cuda");
  BenchLayer l = make_bench_layer(o.layer);
  l.config.activation_dtype = activation_dtype(o.dtype, device);
  const DeviceDesc desc = query_device(device);
  const LayerDesc layer = describe(*l.experts, l.config);
  const Selection plan = evaluate(layer, desc);
  if (plan.plan.size() != 2) {
    std::string why;
    for (const Verdict& v : plan.verdicts)
      if (!v.chosen && v.backend != plan.backend)
        why += fmt::format("\n  {}: {}", v.backend, v.reason);
    throw ProblemFound{fmt::format("no large-batch backend for {} on {}; nothing to tune:{}",
                                   layer.to_string(), desc.to_string(), why)};
  }
  const std::string small = plan.plan[0].backend, large = plan.plan[1].backend;
  const MoE a(l.config, *l.experts, small, device), b(l.config, *l.experts, large, device);
  fmt::print("tune: {} on {}\n{:>7}  {:>12}  {:>12}  faster\n", l.source, desc.to_string(), "M",
             small, large);

  std::vector<int64_t> ms = o.m;
  std::sort(ms.begin(), ms.end());
  std::vector<bool> large_faster;
  std::mt19937_64 rng(o.layer.seed);
  for (const int64_t M : ms) {
    Buffer hidden(*l.config.activation_dtype, {M, l.config.hidden});
    Buffer logits(DType::f32, {M, l.config.num_experts});
    sample::fill_normal(hidden, rng);
    sample::fill_normal(logits, rng);
    Buffer out(*l.config.activation_dtype, {M, l.config.hidden});
    const double ta = run_forwards(a, hidden, logits, out, device, o.repeats).median();
    const double tb = run_forwards(b, hidden, logits, out, device, o.repeats).median();
    large_faster.push_back(tb < ta);
    fmt::print("{:>7}  {:>12}  {:>12}  {}\n", M, format_seconds(ta), format_seconds(tb),
               tb < ta ? large : small);
  }
  size_t first = ms.size();
  while (first > 0 && large_faster[first - 1]) --first;
  // Never faster in the sweep: beyond its largest M, so the plan keeps the small-batch backend.
  const int64_t from = first < ms.size() ? std::max<int64_t>(ms[first], 2) : ms.back() + 1;
  const std::filesystem::path file =
      o.file.empty() ? tune_file_path() : std::filesystem::path(o.file);
  fmt::print("crossover: {} from {} tokens (default {})\n", large, from, plan.plan[1].from_tokens);
  if (o.dry_run) return;
  if (file.empty()) usage_error("no tune file: set QMOE_TUNE_FILE or HOME, or give --file");
  store_crossover(file, desc.name, layer, large, from);
  fmt::print("stored in {}\n", file.string());
}

void add_tune(CLI::App& root) {
  auto o = std::make_shared<TuneOptions>();
  CLI::App* cmd = root.add_subcommand(
      "tune", "Measure from how many tokens the large-batch backend is faster, and store it");
  add_layer_flags(*cmd, o->layer);
  cmd->add_option("--m", o->m, "Token counts of the sweep")
      ->delimiter(',')
      ->check(at_least(1))
      ->capture_default_str();
  cmd->add_option("--device", o->device, "auto (the first GPU), cuda or cuda:N")
      ->capture_default_str();
  cmd->add_option("--dtype", o->dtype, "Activation dtype: auto (bf16), bf16 or f16")
      ->capture_default_str();
  cmd->add_option("--file", o->file, "Tune file (default: QMOE_TUNE_FILE or ~/.cache/qmoe)");
  cmd->add_option("--repeats", o->repeats, "Timed forwards per backend and M")
      ->capture_default_str()
      ->check(at_least(1));
  cmd->add_flag("--dry-run", o->dry_run, "Measure and print, store nothing");
  cmd->callback([o] { run_tune(*o); });
}

const bool registered = register_command(&add_tune);

}  // namespace
}  // namespace qmoe::cli
