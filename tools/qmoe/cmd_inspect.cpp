// `qmoe inspect DIR [--json]`: what a checkpoint holds (format, scheme, MoE shape, per-layer
// shapes and bytes) and anything suspicious (layers that do not load, zero scales).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <nlohmann/json.hpp>

#include "command.hpp"
#include "format/inspect.hpp"
#include "open_flags.hpp"
#include "progress.hpp"
#include "qmoe/checkpoint.hpp"
#include "units.hpp"

namespace qmoe::cli {
namespace {

struct InspectOptions {
  std::string dir;
  bool json = false;
  OpenFlags open;
  bool quiet = false;
};

void print_table(const format::CheckpointReport& r) {
  const MoEConfig& m = r.moe;
  fmt::print("checkpoint:  {}\n", r.dir);
  fmt::print("format:      {}{}\n", r.format,
             r.model_type.empty() ? "" : "  (model " + r.model_type + ")");
  fmt::print("scheme:      {}, scales stored as {}\n", r.scheme, r.scale_dtype);
  fmt::print("experts:     {} ({}), top-{}, {} scoring{}{}\n", m.num_experts, r.naming, m.top_k(),
             name(m.routing.scoring), m.routing.renormalize ? ", renormalized" : "",
             m.routing.n_group > 0
                 ? fmt::format(", {} groups keep {}", m.routing.n_group, m.routing.topk_group)
                 : "");
  fmt::print("shape:       H = {}, I = {}, activation {}\n", m.hidden, m.intermediate,
             name(m.activation));
  fmt::print("\n{:>5}  {:>16}  {:>16}  {:>10}  {:>21}  {}\n", "layer", "w13 [E,N,K]", "w2 [E,N,K]",
             "size", "|scale| min..max", "status");
  int64_t total = 0;
  for (const auto& l : r.layers) {
    total += l.bytes;
    if (!l.error.empty()) {
      fmt::print("{:>5}  {:>16}  {:>16}  {:>10}  {:>21}  error\n", l.layer, "-", "-",
                 format_bytes(l.bytes), "-");
      continue;
    }
    const float lo = std::min(l.w13.min_abs_scale, l.w2.min_abs_scale);
    const float hi = std::max(l.w13.max_abs_scale, l.w2.max_abs_scale);
    fmt::print("{:>5}  {:>16}  {:>16}  {:>10}  {:>10.3g}..{:<9.3g}  ok{}\n", l.layer,
               fmt::format("{}", fmt::join(l.w13.shape, "x")),
               fmt::format("{}", fmt::join(l.w2.shape, "x")), format_bytes(l.bytes), lo, hi,
               l.has_bias ? " (bias)" : "");
  }
  fmt::print("{}, {} of expert tensors\n",
             plural(static_cast<int64_t>(r.layers.size()), "MoE layer", "MoE layers"),
             format_bytes(total));
  if (r.findings.empty()) {
    fmt::print("nothing suspicious\n");
  } else {
    fmt::print("\n{}:\n", plural(static_cast<int64_t>(r.findings.size()), "finding", "findings"));
    for (const auto& f : r.findings) fmt::print("  - {}\n", f);
  }
}

void run_inspect(const InspectOptions& o) {
  const Checkpoint ckpt = Checkpoint::open(o.dir, o.open.options());
  Progress progress("loading layer", static_cast<int64_t>(ckpt.moe_layers().size()),
                    !o.quiet && !o.json);
  const format::CheckpointReport report = format::inspect(ckpt, [&] { progress.step(); });
  progress.clear();
  if (o.json) {
    fmt::print("{}\n", format::to_json(report).dump(2));
  } else {
    print_table(report);
  }
  if (report.problems > 0) {
    throw ProblemFound{fmt::format("{}: {} in the checkpoint", o.dir,
                                   plural(report.problems, "problem", "problems"))};
  }
}

void add_inspect(CLI::App& root) {
  auto options = std::make_shared<InspectOptions>();
  CLI::App* cmd = root.add_subcommand(
      "inspect", "Show what a quantized MoE checkpoint holds and anything suspicious in it");
  cmd->add_option("dir", options->dir, "Model directory (config.json + *.safetensors)")->required();
  cmd->add_flag("--json", options->json, "Print JSON instead of a table");
  add_open_flags(*cmd, options->open);
  cmd->add_flag("--quiet", options->quiet, "No progress line");
  cmd->callback([options] { run_inspect(*options); });
}

const bool registered = register_command(&add_inspect);

}  // namespace
}  // namespace qmoe::cli
