// `qmoe demo`: the embedded default. Makes a small int4 MoE from a fixed seed, runs a batch through
// the chosen backend, compares with the float64 reference and reports backend, error and time.
#include <fmt/format.h>

#include "command.hpp"
#include "core/check.hpp"
#include "flag_checks.hpp"
#include "forward_run.hpp"
#include "qmoe/checkpoint.hpp"
#include "qmoe/device.hpp"
#include "qmoe/moe.hpp"
#include "sample/random_moe.hpp"
#include "threads_flag.hpp"
#include "token_memory.hpp"
#include "units.hpp"

namespace qmoe::cli {
namespace {

struct DemoOptions {
  std::string backend = "auto";
  std::string device = "auto";
  std::string dtype = "auto";
  int64_t tokens = 16;
  int repeats = 20;
  uint64_t seed = 2026;
  std::string model;  // a checkpoint directory; empty = the embedded default
};

sample::MoECase default_case(const DemoOptions& o, DType dtype) {
  const sample::CaseSpec spec{.E = 8,
                              .H = 512,
                              .I = 1024,
                              .M = o.tokens,
                              .top_k = 2,
                              .scheme = QuantScheme{.bits = 4, .group_size = 128},
                              .act_dtype = dtype,
                              .seed = o.seed};
  MoEConfig config;
  config.num_experts = spec.E;
  config.hidden = spec.H;
  config.intermediate = spec.I;
  config.routing.top_k = spec.top_k;
  check_tokens_fit(o.tokens, config, dtype);
  fmt::print("qmoe demo: E={} top-k={} H={} I={} {} weights, {} in {}\n", spec.E, spec.top_k,
             spec.H, spec.I, to_string(spec.scheme), plural(spec.M, "token", "tokens"),
             name(dtype));
  return sample::make_case(spec);
}

// The first MoE layer of a checkpoint, with random hidden states and router logits.
sample::MoECase model_case(const DemoOptions& o, DType dtype) {
  const Checkpoint ckpt = Checkpoint::open(o.model);
  const int layer = ckpt.moe_layers().front();
  const MoEConfig m = ckpt.layer_config(layer);
  check_tokens_fit(o.tokens, m, dtype);
  fmt::print("qmoe demo: {} layer {} ({}): E={} top-k={} H={} I={} {} weights, {} in {}\n", o.model,
             layer, ckpt.format(), m.num_experts, m.top_k(), m.hidden, m.intermediate,
             to_string(ckpt.scheme()), plural(o.tokens, "token", "tokens"), name(dtype));
  std::mt19937_64 rng(o.seed);
  return sample::make_case(m, ckpt.load_layer(layer), o.tokens, dtype, rng);
}

void run_demo(const DemoOptions& o) {
  const Device device = machine_device(o.device);
  const DType dtype = activation_dtype(o.dtype, device);
  sample::MoECase c = o.model.empty() ? default_case(o, dtype) : model_case(o, dtype);

  // The reference is computed: the MoE takes the canonical weights over, so that the cpu backend
  // can free each once packed and the layer is not held twice.
  const MoE moe(c.config, std::move(*c.experts), o.backend, device);
  Buffer out(dtype, {o.tokens, c.config.hidden});
  const TimedForward timed = run_forwards(moe, c.hidden, c.router_logits, out, device, o.repeats);
  const double error = sample::relative_error(out, c.reference);
  const double bound = error_bound(dtype);
  fmt::print("backend:        {} on {}\n", moe.backend_name(), to_string(device));
  for (const Verdict& v : moe.selection().verdicts)
    if (!v.chosen) fmt::print("  not {}: {}\n", v.backend, v.reason);
  fmt::print("relative error: {:.3e} (bound {:.1e}, vs float64 reference)\n", error, bound);
  fmt::print("time:           {} per forward (median of {})\n", format_seconds(timed.median()),
             o.repeats);
  check(error < bound, "relative error {:.3e} exceeds the bound {:.1e}", error, bound);
  fmt::print("ok\n");
}

void add_demo(CLI::App& root) {
  auto options = std::make_shared<DemoOptions>();
  CLI::App* demo = root.add_subcommand(
      "demo", "Run a small built-in int4 MoE on the selected backend and check it");
  add_threads_flag(*demo);
  demo->add_option("--backend", options->backend, "Backend name, or auto for the oracle's choice")
      ->capture_default_str()
      ->check(backend_name());
  demo->add_option("--device", options->device, "auto (a GPU when present), cpu, cuda or cuda:N")
      ->capture_default_str();
  demo->add_option("--dtype", options->dtype, "Activation dtype: auto, f32, bf16 or f16")
      ->capture_default_str();
  demo->add_option("--tokens", options->tokens, "Tokens in the batch")
      ->capture_default_str()
      ->check(at_least(1));
  demo->add_option("--repeats", options->repeats, "Timed forwards")
      ->capture_default_str()
      ->check(at_least(1));
  demo->add_option("--seed", options->seed, "Random seed")->capture_default_str();
  demo->add_option("--model", options->model,
                   "Checkpoint directory: run its first MoE layer instead of the built-in one");
  demo->callback([options] { run_demo(*options); });
}

const bool registered = register_command(&add_demo);

}  // namespace
}  // namespace qmoe::cli
