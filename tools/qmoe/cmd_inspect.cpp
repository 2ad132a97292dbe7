// `qmoe inspect DIR [--json] [--tp N --ep M]`: what a checkpoint holds (format, scheme, MoE shape,
// per-layer shapes and bytes) and anything suspicious (layers that do not load, zero scales); with
// a TP x EP plan, the bytes of a layer each rank reads to load its shard (load_shard: its experts,
// and of those its channels' rows or runs of columns).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <nlohmann/json.hpp>
#include <optional>
#include <vector>

#include "command.hpp"
#include "format/inspect.hpp"
#include "open_flags.hpp"
#include "progress.hpp"
#include "qmoe/checkpoint.hpp"
#include "qmoe/distributed.hpp"
#include "qmoe/oracle.hpp"
#include "qmoe/shard.hpp"
#include "units.hpp"

namespace qmoe::cli {
namespace {

struct InspectOptions {
  std::string dir;
  bool json = false;
  OpenFlags open;
  bool quiet = false;
  int tp = 1, ep = 1;
};

// What each rank of a tp x ep plan reads of the first MoE layer (the layers share one shape).
struct ShardReads {
  int tp = 1, ep = 1, layer = 0;
  int64_t layer_bytes = 0;
  std::vector<int64_t> rank_bytes;
};

ShardReads shard_reads(const Checkpoint& ckpt, int tp, int ep) {
  ShardReads s{tp, ep, ckpt.moe_layers().front(), 0, {}};
  const ShardPlan plan = plan_shards(describe(ckpt.scheme(), ckpt.moe_config()),
                                     ShardSpec{.tp_size = tp, .ep_size = ep});
  s.layer_bytes = ckpt.layer_bytes(s.layer);
  for (int rank = 0; rank < plan.world_size(); ++rank)
    s.rank_bytes.push_back(shard_bytes(ckpt, s.layer, plan, rank));
  return s;
}

void print_shard_reads(const ShardReads& s) {
  fmt::print("\nshards (TP {} x EP {}), bytes of layer {} each rank reads for its shard:\n", s.tp,
             s.ep, s.layer);
  for (size_t rank = 0; rank < s.rank_bytes.size(); ++rank)
    fmt::print("  rank {}: {} of {}\n", rank, format_bytes(s.rank_bytes[rank]),
               format_bytes(s.layer_bytes));
}

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
  std::optional<ShardReads> shards;
  if ((o.tp > 1 || o.ep > 1) && !ckpt.moe_layers().empty()) shards = shard_reads(ckpt, o.tp, o.ep);
  if (o.json) {
    nlohmann::json j = format::to_json(report);
    if (shards) {
      j["shards"] = {{"tp", shards->tp},
                     {"ep", shards->ep},
                     {"layer", shards->layer},
                     {"layer_bytes", shards->layer_bytes},
                     {"rank_bytes", shards->rank_bytes}};
    }
    fmt::print("{}\n", j.dump(2));
  } else {
    print_table(report);
    if (shards) print_shard_reads(*shards);
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
  cmd->add_option("--tp", options->tp, "Tensor-parallel size: show what each rank reads")
      ->capture_default_str()
      ->check(CLI::Range(1, 64));
  cmd->add_option("--ep", options->ep, "Expert-parallel size: show what each rank reads")
      ->capture_default_str()
      ->check(CLI::Range(1, 64));
  cmd->callback([options] { run_inspect(*options); });
}

const bool registered = register_command(&add_inspect);

}  // namespace
}  // namespace qmoe::cli
