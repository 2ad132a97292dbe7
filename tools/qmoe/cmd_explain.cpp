// `qmoe explain`: which backend the oracle picks for a checkpoint's MoE layers (or a layer
// described by flags) on a device, and why each other backend was rejected. Table or --json.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include <nlohmann/json.hpp>

#include "command.hpp"
#include "core/check.hpp"
#include "flag_checks.hpp"
#include "layer_problems.hpp"
#include "moe/tuning.hpp"
#include "open_flags.hpp"
#include "progress.hpp"
#include "qmoe/checkpoint.hpp"
#include "qmoe/distributed.hpp"
#include "qmoe/oracle.hpp"
#include "qmoe/shard.hpp"
#include "units.hpp"

namespace qmoe::cli {
namespace {

struct ExplainOptions {
  std::string dir;
  std::string device = "cpu";
  std::string backend = "auto";
  std::string dtype;     // empty: not known, every activation dtype is assumed possible
  bool batched = false;  // the forwards take the batched-experts format
  int tp = 1, ep = 1;
  bool json = false, quiet = false;
  OpenFlags open;
  // A layer described by flags instead of a checkpoint.
  int bits = 4;
  int group = 128;
  bool zero_points = false, act_order = false, bias = false, mxfp4 = false, w4a4 = false;
  int64_t experts = 0, hidden = 0, intermediate = 0;
  int top_k = 2;
  std::string activation = "silu";
};

// One distinct layer shape and scheme, and the MoE layers that have it.
struct LayerGroup {
  std::vector<int> layers;  // empty for a layer described by flags
  std::string source;       // "gptq checkpoint DIR" / "described by flags"
  LayerDesc layer;
};

DType parse_dtype(const std::string& s) {
  if (s == "f32") return DType::f32;
  if (s == "f16") return DType::f16;
  if (s == "bf16") return DType::bf16;
  usage_error("--dtype must be f32, f16 or bf16, got '{}'", s);
}

LayerDesc described_layer(const ExplainOptions& o) {
  check(o.experts > 0 && o.hidden > 0 && o.intermediate > 0,
        "describe the layer with --experts, --hidden and --intermediate (or give a checkpoint "
        "directory)");
  QuantScheme scheme{.bits = o.bits,
                     .zero_point = o.zero_points ? ZeroPoint::explicit_ : ZeroPoint::none,
                     .group_size = o.group,
                     .act_order = o.act_order};
  if (o.mxfp4 || o.w4a4)
    scheme = QuantScheme{.kind = WeightKind::mxfp4, .bits = 4, .group_size = 32};
  if (o.w4a4) scheme.activation_quant = ActivationQuant::mxfp4;
  MoEConfig config;
  config.num_experts = o.experts;
  config.hidden = o.hidden;
  config.intermediate = o.intermediate;
  config.routing.top_k = o.top_k;
  config.activation = parse_activation(o.activation);
  config.w13_bias = config.w2_bias = o.bias;
  validate(config);
  return describe(scheme, config);
}

// The checkpoint's MoE layers, each loaded once so that a layer explain would pass but that does
// not load (a NaN scale, a missing expert) is a problem here as in every other command.
std::vector<LayerGroup> layer_groups(const ExplainOptions& o, LayerProblems& problems) {
  const bool described = o.experts > 0 || o.hidden > 0 || o.intermediate > 0;
  if (o.dir.empty())
    return {{{}, "described by flags", parse_flag([&] { return described_layer(o); })}};
  if (described) usage_error("give a checkpoint directory or describe a layer by flags, not both");
  const Checkpoint ckpt = Checkpoint::open(o.dir, o.open.options());
  const std::vector<int> layers = ckpt.moe_layers();
  check(!layers.empty(), "{} holds no quantized MoE layers", o.dir);
  problems = LayerProblems(ckpt.missing_layers());
  Progress progress("checking", static_cast<int64_t>(layers.size()), !o.quiet && !o.json);
  for (int layer : layers) {
    progress.at(fmt::format("layer {}: loading", layer));
    problems.load(ckpt, layer);
    progress.step();
  }
  // The checkpoint declares one scheme and one MoE shape for all its expert layers.
  return {{layers, fmt::format("{} checkpoint {}", ckpt.format(), o.dir),
           describe(ckpt.scheme(), ckpt.moe_config())}};
}

struct Explained {
  LayerGroup group;
  std::optional<ShardPlan> plan;
  LayerDesc judged;  // the layer, or rank 0's shard of it (it carries w2's bias)
  Selection selection;
  std::vector<Selection> ranks;  // with a plan: every rank's own verdict, by rank
};

Explained explain(LayerGroup group, const ExplainOptions& o, const DeviceDesc& device) {
  Explained e{std::move(group), std::nullopt, {}, {}, {}};
  e.group.layer.activation_dtype =
      o.dtype.empty() ? std::optional<DType>() : std::optional<DType>(parse_dtype(o.dtype));
  if (o.batched) e.group.layer.activation_format = ActivationFormat::batched_experts;
  e.judged = e.group.layer;
  if (o.tp > 1 || o.ep > 1) {
    e.plan = plan_shards(e.group.layer, ShardSpec{.tp_size = o.tp, .ep_size = o.ep});
    e.judged = e.plan->rank_layer(0);
    for (int rank = 0; rank < e.plan->world_size(); ++rank) {
      LayerDesc shard = e.plan->rank_layer(rank);
      shard.activation_dtype = e.group.layer.activation_dtype;
      shard.activation_format = e.group.layer.activation_format;
      e.ranks.push_back(evaluate(shard, device, o.backend));
    }
  }
  e.selection = evaluate(e.judged, device, o.backend);
  if (!device.described) apply_tuned_crossover(e.selection, device.name, e.judged);
  return e;
}

std::string shard_line(const ShardPlan& plan) {
  const RankShard& r = plan.ranks.front();
  return fmt::format(
      "TP {} x EP {} ({} ranks); rank 0 holds experts {}..{} and channels {}..{} of {}",
      plan.spec.tp_size, plan.spec.ep_size, plan.world_size(), r.first_expert,
      r.first_expert + r.num_experts - 1, r.first_channel, r.first_channel + r.intermediate - 1,
      plan.layer.intermediate);
}

// Which communicators this build can give CUDA ranks (NCCL, or why not).
std::string communicator_line() {
  return nccl_built()
             ? fmt::format(
                   "one GPU per rank over {}; ranks sharing a device run over "
                   "in-process communicators",
                   nccl_status())
             : fmt::format("no NCCL ({}); ranks run over in-process communicators", nccl_status());
}

// The activation formats a backend's forwards take: "standard, batched_experts".
std::vector<std::string> format_list(const Verdict& v) {
  std::vector<std::string> names;
  for (ActivationFormat f : v.activation_formats) names.emplace_back(name(f));
  return names;
}

// The MoE layers a group stands for (a layer described by flags is one).
int64_t layer_count(const LayerGroup& g) {
  return std::max<int64_t>(1, static_cast<int64_t>(g.layers.size()));
}

std::string format_names(const Verdict& v) {
  return fmt::format("{}", fmt::join(format_list(v), ", "));
}

void print_table(const std::vector<Explained>& all, const DeviceDesc& device,
                 const LayerProblems& problems) {
  fmt::print("device: {}\n", device.to_string());
  for (const Explained& e : all) {
    fmt::print("\n{}{}\n",
               e.group.layers.empty() ? "layer" : "layers " + number_ranges(e.group.layers),
               fmt::format(" ({}): {}", e.group.source, e.group.layer.to_string()));
    if (e.plan) {
      fmt::print("shard: {}\n", shard_line(*e.plan));
      fmt::print("communicator: {}\n", communicator_line());
    }
    size_t width = 7;
    for (const Verdict& v : e.selection.verdicts) width = std::max(width, v.backend.size());
    fmt::print("  {:<{}}  {:<8}  {}\n", "backend", width, "verdict", "reason");
    for (const Verdict& v : e.selection.verdicts) {
      const bool planned =
          std::any_of(e.selection.plan.begin(), e.selection.plan.end(),
                      [&](const PlanStep& step) { return step.backend == v.backend; });
      const std::string line = fmt::format("  {:<{}}  {:<8}  {}", v.backend, width,
                                           v.chosen  ? "chosen"
                                           : planned ? "planned"
                                                     : "rejected",
                                           v.reason);
      fmt::print("{}\n", line.substr(0, line.find_last_not_of(' ') + 1));
    }
    if (e.selection.weight_bytes > 0)
      fmt::print("  weights as {} prepares them: {} ({} of codes padding N and K to its tiles)\n",
                 e.selection.backend, format_bytes(e.selection.weight_bytes),
                 format_bytes(e.selection.padding_bytes));
    for (const PlanStep& step : e.selection.plan) {
      fmt::print("  plan: {:<{}}  {}\n", step.backend, width, step.why);
      if (step.weight_bytes == 0) continue;
      const std::string holds =
          step.shared_bytes > 0 ? fmt::format("reads {}'s int4 codes ({}) and adds {} of its own",
                                              e.selection.backend, format_bytes(step.shared_bytes),
                                              format_bytes(step.weight_bytes))
                                : fmt::format("keeps its own copy of the weights, {}",
                                              format_bytes(step.weight_bytes));
      if (prepares_large_step_unasked(e.selection))
        fmt::print("        {:<{}}  {} (MoEConfig::large_batch_backend = false leaves it out)\n",
                   "", width, holds);
      else
        fmt::print(
            "        {:<{}}  only when asked: {}, more than {:.0f}% of the first's bytes "
            "(MoEConfig::large_batch_backend = true prepares it)\n",
            "", width, holds, 100 * kLargeBatchExtraRatio);
    }
    if (e.selection.weight_bytes > 0) {
      const int64_t per_layer = default_weight_bytes(e.selection);
      fmt::print("  weights held by default: {} per layer", format_bytes(per_layer));
      if (e.group.layers.size() > 1)
        fmt::print(", {} for the {} layers", format_bytes(per_layer * layer_count(e.group)),
                   layer_count(e.group));
      fmt::print("{}\n", e.plan ? " (rank 0)" : "");
    }
    if (!e.selection.error.empty()) fmt::print("no backend chosen: {}\n", e.selection.error);
    for (size_t rank = 0; rank < e.ranks.size(); ++rank) {
      const RankShard& r = e.plan->ranks[rank];
      const Selection& s = e.ranks[rank];
      fmt::print("  rank {}: experts {}..{}, channels {}..{}: {}\n", rank, r.first_expert,
                 r.first_expert + r.num_experts - 1, r.first_channel,
                 r.first_channel + r.intermediate - 1,
                 s.backend.empty()
                     ? "no backend"
                     : fmt::format("{}, {} of weights", s.backend, format_bytes(s.weight_bytes)));
    }
  }
  if (!problems.empty()) fmt::print("\nproblems:\n");
  for (const std::string& line : problems.lines()) fmt::print("  {}\n", line);
  fmt::print("\nbackends:\n");
  for (const Verdict& v : all.front().selection.verdicts)
    fmt::print("  {:<12} {}; takes {}\n", v.backend, v.summary, format_names(v));
}

void print_json(const std::vector<Explained>& all, const DeviceDesc& device,
                const LayerProblems& problems) {
  nlohmann::json out;
  out["device"] = {{"name", device.name},
                   {"kind", device.kind == DeviceKind::cpu ? "cpu" : "cuda"},
                   {"described", device.described}};
  if (device.kind == DeviceKind::cuda) {
    out["device"]["compute_capability"] = device.compute_capability;
  } else {
    std::vector<std::string> features;
    for (CpuFeature f : device.cpu_features) features.emplace_back(name(f));
    out["device"]["cpu_features"] = features;
  }
  out["groups"] = nlohmann::json::array();
  for (const Explained& e : all) {
    nlohmann::json g;
    g["layers"] = e.group.layers;
    g["source"] = e.group.source;
    g["layer"] = e.group.layer.to_string();
    g["scheme"] = to_string(e.group.layer.w13_scheme);
    g["activation_format"] = name(e.group.layer.activation_format);
    if (e.plan) {
      g["shard"] = {{"tp", e.plan->spec.tp_size},
                    {"ep", e.plan->spec.ep_size},
                    {"judged_rank", 0},
                    {"nccl", nccl_built()},
                    {"communicator", communicator_line()},
                    {"judged_layer", e.judged.to_string()},
                    {"ranks", nlohmann::json::array()}};
      for (size_t rank = 0; rank < e.ranks.size(); ++rank) {
        const RankShard& r = e.plan->ranks[rank];
        const Selection& s = e.ranks[rank];
        g["shard"]["ranks"].push_back(
            {{"rank", rank},
             {"first_expert", r.first_expert},
             {"experts", r.num_experts},
             {"first_channel", r.first_channel},
             {"channels", r.intermediate},
             {"backend", s.backend.empty() ? nlohmann::json() : nlohmann::json(s.backend)},
             {"weight_bytes", s.weight_bytes}});
      }
    }
    g["chosen"] =
        e.selection.backend.empty() ? nlohmann::json() : nlohmann::json(e.selection.backend);
    if (!e.selection.error.empty()) g["error"] = e.selection.error;
    g["weight_bytes"] = e.selection.weight_bytes;
    g["padding_bytes"] = e.selection.padding_bytes;
    const int64_t default_bytes = default_weight_bytes(e.selection);
    g["default_weight_bytes"] = default_bytes;
    g["default_weight_bytes_all_layers"] = default_bytes * layer_count(e.group);
    g["backends"] = nlohmann::json::array();
    for (const Verdict& v : e.selection.verdicts) {
      g["backends"].push_back({{"name", v.backend},
                               {"chosen", v.chosen},
                               {"summary", v.summary},
                               {"compatible", v.compatible},
                               {"reason", v.reason},
                               {"activation_formats", format_list(v)}});
    }
    g["plan"] = nlohmann::json::array();
    for (const PlanStep& step : e.selection.plan)
      g["plan"].push_back({{"backend", step.backend},
                           {"from_tokens", step.from_tokens},
                           {"why", step.why},
                           {"weight_bytes", step.weight_bytes},
                           {"shared_bytes", step.shared_bytes}});
    out["groups"].push_back(std::move(g));
  }
  out["problems"] = problems.lines();
  fmt::print("{}\n", out.dump(2));
}

void run_explain(const ExplainOptions& o) {
  const DeviceDesc device = parse_flag([&] { return parse_device(o.device); });
  LayerProblems problems({});
  std::vector<Explained> all;
  for (LayerGroup& g : layer_groups(o, problems)) all.push_back(explain(std::move(g), o, device));
  if (o.json) {
    print_json(all, device, problems);
  } else {
    print_table(all, device, problems);
  }
  std::vector<std::string> what;
  if (!problems.empty()) what.push_back(fmt::format("{}: {}", o.dir, problems.summary()));
  for (const Explained& e : all) {
    if (!e.selection.error.empty())
      what.push_back(fmt::format(
          "no backend can run {} on {}",
          e.group.layers.empty() ? "the layer" : "layers " + number_ranges(e.group.layers),
          device.to_string()));
  }
  if (!what.empty()) throw ProblemFound{fmt::format("{}", fmt::join(what, "; "))};
}

void add_explain(CLI::App& root) {
  auto o = std::make_shared<ExplainOptions>();
  CLI::App* cmd = root.add_subcommand(
      "explain", "Which backend runs each MoE layer on a device, and why the others do not");
  cmd->add_option("dir", o->dir, "Checkpoint directory (or describe a layer with the flags below)");
  cmd->add_option("--device", o->device,
                  "cpu (this host), cpu:avx2,fma,..., cuda[:N], sm_80, sm_90a, a100, h100, ...")
      ->capture_default_str();
  cmd->add_option("--backend", o->backend, "auto, or the backend you want checked")
      ->capture_default_str()
      ->check(backend_name());
  cmd->add_option("--dtype", o->dtype, "Activation dtype f32, f16 or bf16 (default: any)");
  cmd->add_flag("--batched", o->batched,
                "The forwards take the batched-experts format ([E, T_max, H] and counts, "
                "MoE::forward_batched): only backends that take it");
  cmd->add_option("--tp", o->tp, "Tensor-parallel size")->capture_default_str()->check(at_least(1));
  cmd->add_option("--ep", o->ep, "Expert-parallel size")->capture_default_str()->check(at_least(1));
  cmd->add_flag("--json", o->json, "Print JSON instead of a table");
  cmd->add_flag("--quiet", o->quiet, "No progress line");
  add_open_flags(*cmd, o->open);
  cmd->add_option("--bits", o->bits, "Layer by flags: weight bits (4 or 8)")->capture_default_str();
  cmd->add_option("--group", o->group, "Layer by flags: group size (-1 = channelwise)")
      ->capture_default_str();
  cmd->add_flag("--zp", o->zero_points, "Layer by flags: asymmetric (explicit zero points)");
  cmd->add_flag("--act-order", o->act_order, "Layer by flags: act-order (g_idx)");
  cmd->add_flag("--bias", o->bias, "Layer by flags: expert bias on w13 and w2");
  cmd->add_flag("--mxfp4", o->mxfp4, "Layer by flags: MXFP4 weights (ignores bits/group/zp)");
  cmd->add_flag("--w4a4", o->w4a4,
                "Layer by flags: MXFP4 weights and MXFP4 activations (OCP MX W4A4; implies "
                "--mxfp4)");
  cmd->add_option("--experts", o->experts, "Layer by flags: number of experts");
  cmd->add_option("--hidden", o->hidden, "Layer by flags: hidden size H");
  cmd->add_option("--intermediate", o->intermediate, "Layer by flags: intermediate size I");
  cmd->add_option("--top-k", o->top_k, "Layer by flags: experts per token")->capture_default_str();
  cmd->add_option("--activation", o->activation, "Layer by flags: activation")
      ->capture_default_str();
  cmd->callback([o] { run_explain(*o); });
}

const bool registered = register_command(&add_explain);

}  // namespace
}  // namespace qmoe::cli
