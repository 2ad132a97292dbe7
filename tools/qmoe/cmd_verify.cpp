// `qmoe verify DIR`: every MoE layer the checkpoint declares loads, and every backend that can run
// it on this machine (CPU and each GPU) matches the float64 reference on random tokens. One row per
// layer and backend; exit 1 when any row fails. With --tp / --ep, every rank of that plan runs
// instead, on each device of the machine (ranks as threads sharing the CPU or one GPU, or one GPU
// per rank over NCCL when there are enough GPUs; each rank on the backend the oracle picks for its
// shard), and every rank's summed output is checked.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <random>
#include <thread>

#include "command.hpp"
#include "flag_checks.hpp"
#include "forward_run.hpp"
#include "open_flags.hpp"
#include "placed_tensor.hpp"
#include "progress.hpp"
#include "qmoe/checkpoint.hpp"
#include "qmoe/distributed.hpp"
#include "qmoe/oracle.hpp"
#include "sample/random_moe.hpp"
#include "threads_flag.hpp"
#include "token_memory.hpp"
#include "units.hpp"

namespace qmoe::cli {
namespace {

struct VerifyOptions {
  std::string dir;
  OpenFlags open;
  int64_t tokens = 16;
  uint64_t seed = 2026;
  bool quiet = false;
  int tp = 1, ep = 1;
};

constexpr int kForwards = 3;  // timed per backend; the median is reported

struct Row {
  int layer = 0;
  std::string backend = "-", device = "-", dtype = "-";
  double error = 0, bound = 0, seconds = 0;
  std::string failure;  // empty: passed
};

void print_row(const Row& r) {
  const bool ran = r.bound > 0;
  fmt::print("{:>5}  {:<10}  {:<8}  {:<5}  {:>10}  {:>8}  {:>10}  {}\n", r.layer, r.backend,
             r.device, r.dtype, ran ? fmt::format("{:.2e}", r.error) : "-",
             ran ? fmt::format("{:.1e}", r.bound) : "-", ran ? format_seconds(r.seconds) : "-",
             r.failure.empty() ? "ok" : "FAIL: " + r.failure);
}

// Every backend that passes the oracle's checks for this layer on `device`, each run and compared.
std::vector<Row> check_on(const DeviceDesc& device, int layer, const MoEConfig& config,
                          const QuantizedExperts& experts, const VerifyOptions& o,
                          Progress& progress) {
  const DType dtype = activation_dtype("auto", device.device());
  const std::string where = fmt::format("layer {}: ", layer);
  LayerDesc desc = describe(experts, config);
  desc.activation_dtype = dtype;
  std::mt19937_64 rng(o.seed + static_cast<uint64_t>(layer));
  progress.at(where + "float64 reference");
  const sample::MoECase c = sample::make_case(config, experts.clone(), o.tokens, dtype, rng);
  std::vector<Row> rows;
  for (const Verdict& v : evaluate(desc, device).verdicts) {
    if (!v.compatible) continue;
    Row r{.layer = layer,
          .backend = v.backend,
          .device = to_string(device.device()),
          .dtype = std::string(name(dtype)),
          .bound = error_bound(dtype),
          .failure = {}};
    try {
      progress.at(fmt::format("{}{} on {}, preparing", where, r.backend, r.device));
      const MoE moe(c.config, *c.experts, v.backend, device.device());
      Buffer out(dtype, {o.tokens, config.hidden});
      progress.at(fmt::format("{}{} on {}, {} forwards", where, r.backend, r.device, kForwards));
      r.seconds =
          run_forwards(moe, c.hidden, c.router_logits, out, device.device(), kForwards).median();
      r.error = sample::relative_error(out, c.reference);
      if (!(r.error < r.bound)) r.failure = "error above the bound";
    } catch (const Error& e) {
      r.failure = e.what();
    }
    rows.push_back(std::move(r));
  }
  if (rows.empty()) {
    rows.push_back(Row{.layer = layer,
                       .device = to_string(device.device()),
                       .dtype = std::string(name(dtype)),
                       .failure = "no backend can run this layer here"});
  }
  return rows;
}

// Where the ranks of a plan run: every rank on one device over in-process communicators (the CPU,
// or ranks sharing one GPU), or one GPU per rank over NCCL.
struct RankPlacement {
  std::vector<Device> devices;  // by rank
  bool nccl = false;
  std::string label;  // the row's device column
};

RankPlacement placement_on(const DeviceDesc& device, int world) {
  std::vector<DeviceDesc> gpus;
  if (device.kind == DeviceKind::cuda) gpus = cuda_devices();
  if (device.kind == DeviceKind::cuda && nccl_built() && int(gpus.size()) >= world && world > 1) {
    RankPlacement p{.devices = {}, .nccl = true, .label = fmt::format("cuda:0-{} nccl", world - 1)};
    for (int r = 0; r < world; ++r) p.devices.push_back(gpus[size_t(r)].device());
    return p;
  }
  return RankPlacement{.devices = std::vector<Device>(size_t(world), device.device()),
                       .nccl = false,
                       .label = to_string(device.device())};
}

std::vector<std::unique_ptr<Communicator>> communicators_for(const RankPlacement& p) {
  if (!p.nccl) return local_communicators(int(p.devices.size()));
  std::vector<int> indices;
  for (const Device& d : p.devices) indices.push_back(d.index);
  return nccl_communicators(indices);
}

// Every rank of the tp x ep plan on `device` (ranks as threads; their shards prepared first, so a
// shard no backend takes fails before any rank waits in a collective); the row's error is the
// largest over the ranks' outputs, its time the wall time of the ranks' forward.
Row check_sharded(const DeviceDesc& device, int layer, const MoEConfig& config,
                  const QuantizedExperts& experts, const VerifyOptions& o, Progress& progress) {
  const DType dtype = activation_dtype("auto", device.device());
  const int world = o.tp * o.ep;
  const RankPlacement placement = placement_on(device, world);
  Row r{.layer = layer,
        .backend = fmt::format("tp{}-ep{}", o.tp, o.ep),
        .device = placement.label,
        .dtype = std::string(name(dtype)),
        .bound = error_bound(dtype),
        .failure = {}};
  try {
    std::mt19937_64 rng(o.seed + static_cast<uint64_t>(layer));
    const std::string where = fmt::format("layer {}: ", layer);
    progress.at(where + "float64 reference");
    const sample::MoECase c = sample::make_case(config, experts.clone(), o.tokens, dtype, rng);
    const ShardPlan plan =
        plan_shards(describe(experts, config), ShardSpec{.tp_size = o.tp, .ep_size = o.ep});
    const auto comms = communicators_for(placement);
    std::vector<std::unique_ptr<ShardedMoE>> ranks;
    std::vector<Buffer> outs;
    std::vector<PlacedTensor> hidden, logits, placed_outs;
    for (int rank = 0; rank < world; ++rank) {
      const Device d = placement.devices[size_t(rank)];
      progress.at(
          fmt::format("{}rank {} of {} on {}, preparing", where, rank, world, to_string(d)));
      ranks.push_back(std::make_unique<ShardedMoE>(c.config, *c.experts, plan, *comms[size_t(rank)],
                                                   "auto", d));
      outs.emplace_back(dtype, std::initializer_list<int64_t>{o.tokens, config.hidden});
      hidden.emplace_back(c.hidden, d);
      logits.emplace_back(c.router_logits, d);
      placed_outs.emplace_back(outs.back(), d);
    }
    progress.at(fmt::format("{}{} ranks, forward", where, world));
    std::vector<std::string> errors(static_cast<size_t>(world));
    const auto start = std::chrono::steady_clock::now();
    std::vector<std::thread> threads;
    for (int rank = 0; rank < world; ++rank)
      threads.emplace_back([&, rank] {
        try {
          const size_t i = size_t(rank);
          const DeviceStream stream(placement.devices[i]);
          ranks[i]->forward(hidden[i].view(), logits[i].view(), placed_outs[i].view(),
                            stream.get());
          synchronize(placement.devices[i]);
        } catch (const Error& e) {
          errors[size_t(rank)] = e.what();
        }
      });
    for (std::thread& t : threads) t.join();
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    for (int rank = 0; rank < world; ++rank) {
      if (!errors[size_t(rank)].empty())
        throw Error(fmt::format("rank {}: {}", rank, errors[size_t(rank)]));
      placed_outs[size_t(rank)].copy_to(outs[size_t(rank)]);
      r.error = std::max(r.error, sample::relative_error(outs[size_t(rank)], c.reference));
    }
    if (!(r.error < r.bound)) r.failure = "error above the bound";
  } catch (const Error& e) {
    r.failure = e.what();
    r.bound = 0;  // nothing ran to completion: no error or time to show
  }
  return r;
}

void run_verify(const VerifyOptions& o) {
  const Checkpoint ckpt = Checkpoint::open(o.dir, o.open.options());
  const bool sharded = o.tp * o.ep > 1;
  const std::vector<DeviceDesc> devices = machine_devices();
  for (const DeviceDesc& device : devices)
    check_tokens_fit(o.tokens, ckpt.moe_config(), activation_dtype("auto", device.device()));
  fmt::print("{}: {} checkpoint, {}, {} per check{}\n", o.dir, ckpt.format(),
             to_string(ckpt.scheme()), plural(o.tokens, "token", "tokens"),
             sharded ? fmt::format(", tp {} x ep {} ranks", o.tp, o.ep) : "");
  fmt::print("{:>5}  {:<10}  {:<8}  {:<5}  {:>10}  {:>8}  {:>10}  {}\n", "layer", "backend",
             "device", "dtype", "rel. error", "bound", "time", "status");
  int failures = 0;
  Progress progress("verifying", static_cast<int64_t>(ckpt.moe_layers().size()), !o.quiet);
  for (int layer : ckpt.moe_layers()) {
    std::vector<Row> rows;
    progress.at(fmt::format("layer {}: loading", layer));
    try {
      const QuantizedExperts experts = ckpt.load_layer(layer);
      const MoEConfig config = ckpt.layer_config(layer);
      for (const DeviceDesc& device : devices) {
        if (sharded) {
          rows.push_back(check_sharded(device, layer, config, experts, o, progress));
          continue;
        }
        for (Row& r : check_on(device, layer, config, experts, o, progress))
          rows.push_back(std::move(r));
      }
    } catch (const Error& e) {
      rows.push_back(Row{.layer = layer, .failure = std::string("does not load: ") + e.what()});
    }
    progress.clear();
    for (const Row& r : rows) {
      print_row(r);
      failures += r.failure.empty() ? 0 : 1;
    }
    progress.step();
  }
  progress.clear();
  for (int layer : ckpt.missing_layers()) {
    print_row(Row{.layer = layer, .failure = "declared in config.json, no experts in the files"});
    ++failures;
  }
  if (failures > 0)
    throw ProblemFound{fmt::format("{}: {} failed", o.dir, plural(failures, "check", "checks"))};
  fmt::print("ok\n");
}

void add_verify(CLI::App& root) {
  auto o = std::make_shared<VerifyOptions>();
  CLI::App* cmd = root.add_subcommand(
      "verify", "Check every layer on every backend of this machine against the reference");
  cmd->add_option("dir", o->dir, "Checkpoint directory")->required();
  add_open_flags(*cmd, o->open);
  add_threads_flag(*cmd);
  cmd->add_option("--tokens", o->tokens, "Random tokens per check")
      ->capture_default_str()
      ->check(at_least(1));
  cmd->add_option("--seed", o->seed, "Random seed")->capture_default_str();
  cmd->add_flag("--quiet", o->quiet, "No progress line");
  cmd->add_option("--tp", o->tp,
                  "Tensor-parallel ranks (threads sharing a device, or a GPU each over NCCL)")
      ->capture_default_str()
      ->check(CLI::Range(1, 64));
  cmd->add_option("--ep", o->ep,
                  "Expert-parallel ranks (threads sharing a device, or a GPU each over NCCL)")
      ->capture_default_str()
      ->check(CLI::Range(1, 64));
  cmd->callback([o] { run_verify(*o); });
}

const bool registered = register_command(&add_verify);

}  // namespace
}  // namespace qmoe::cli
