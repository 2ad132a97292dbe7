// `qmoe run DIR`: runs MoE layers of a checkpoint on random hidden states (or those of --input)
// and prints per layer the backend, the median time, the achieved weight bandwidth and FLOP rate,
// and the error against the float64 reference. --output saves the outputs (safetensors).
#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <random>
#include <set>

#include "command.hpp"
#include "core/check.hpp"
#include "flag_checks.hpp"
#include "format/mapped_file.hpp"
#include "format/safetensors.hpp"
#include "format/safetensors_writer.hpp"
#include "forward_run.hpp"
#include "layer_problems.hpp"
#include "open_flags.hpp"
#include "progress.hpp"
#include "qmoe/checkpoint.hpp"
#include "sample/random_moe.hpp"
#include "threads_flag.hpp"
#include "token_memory.hpp"
#include "units.hpp"

namespace qmoe::cli {
namespace {

struct RunOptions {
  std::string dir;
  std::vector<int> layers;  // empty: every MoE layer
  int64_t tokens = 16;
  std::string backend = "auto";
  std::string device = "auto";
  std::string dtype = "auto";
  std::string input, output;
  int repeats = 10;
  uint64_t seed = 2026;
  OpenFlags open;
  bool quiet = false;
};

Buffer to_buffer(const format::TensorInfo& t) {
  const std::optional<DType> dtype = format::to_dtype(t.dtype);
  check(dtype.has_value(), "{}: tensor '{}' is {}, which qmoe cannot hold", t.file, t.name,
        t.describe());
  Buffer b(*dtype, std::span<const int64_t>(t.shape));
  std::memcpy(b.data(), t.bytes.data(), t.bytes.size());
  return b;
}

// --input: "hidden" [M, H] (f32, bf16 or f16) and optionally "router_logits" f32 [M, E].
struct Inputs {
  Buffer hidden, router_logits;
};

Inputs read_inputs(const std::string& path, const MoEConfig& config, std::mt19937_64& rng) {
  const format::MappedFile file(path);
  const format::SafetensorsContents contents = format::parse_safetensors(file.bytes(), path);
  const format::TensorInfo* hidden = nullptr;
  const format::TensorInfo* logits = nullptr;
  for (const format::TensorInfo& t : contents.tensors) {
    if (t.name == "hidden") hidden = &t;
    if (t.name == "router_logits") logits = &t;
  }
  check(hidden != nullptr, "{}: no tensor 'hidden' (expected hidden states [M, {}])", path,
        config.hidden);
  Inputs in{to_buffer(*hidden), {}};
  check(in.hidden.shape().size() == 2, "{}: 'hidden' must be [M, {}], got {}", path, config.hidden,
        hidden->describe());
  if (logits) {
    in.router_logits = to_buffer(*logits);
  } else {
    in.router_logits = Buffer(DType::f32, {in.hidden.shape()[0], config.num_experts});
    sample::fill_normal(in.router_logits, rng);
  }
  return in;
}

// The MoE layers to run (--layers, or all) that the files hold; those that config.json declares
// but no file holds go to `missing`.
std::vector<int> layers_to_run(const RunOptions& o, const Checkpoint& ckpt,
                               std::vector<int>& missing) {
  const std::vector<int> present = ckpt.moe_layers(), declared = ckpt.missing_layers();
  auto holds = [](const std::vector<int>& list, int l) {
    return std::find(list.begin(), list.end(), l) != list.end();
  };
  if (o.layers.empty()) {
    missing = declared;
    return present;
  }
  std::vector<int> layers;
  for (int l : o.layers) {
    if (holds(declared, l)) {
      missing.push_back(l);
    } else if (!holds(present, l)) {
      usage_error("--layers: {} is not an MoE layer of {} (MoE layers: {})", l, o.dir,
                  number_ranges(present));
    } else {
      layers.push_back(l);
    }
  }
  return layers;
}

void run_layers(const RunOptions& o) {
  const Device device = machine_device(o.device);
  const DType dtype = activation_dtype(o.dtype, device);
  const Checkpoint ckpt = Checkpoint::open(o.dir, o.open.options());
  if (o.input.empty()) check_tokens_fit(o.tokens, ckpt.moe_config(), dtype);
  std::vector<int> missing;
  const std::vector<int> layers = layers_to_run(o, ckpt, missing);
  LayerProblems problems(std::move(missing));
  format::SafetensorsWriter saved;
  int failures = 0;
  Progress progress("running", static_cast<int64_t>(layers.size()), !o.quiet);
  for (int layer : layers) {
    progress.at(fmt::format("layer {}: loading", layer));
    std::optional<QuantizedExperts> experts = problems.load(ckpt, layer);
    if (!experts) {
      progress.step();
      continue;
    }
    std::mt19937_64 rng(o.seed + static_cast<uint64_t>(layer));
    const MoEConfig config = ckpt.layer_config(layer);
    progress.at(fmt::format("layer {}: float64 reference", layer));
    sample::MoECase c;
    if (o.input.empty()) {
      c = sample::make_case(config, std::move(*experts), o.tokens, dtype, rng);
    } else {
      Inputs in = read_inputs(o.input, config, rng);
      c = sample::make_case(config, std::move(*experts), std::move(in.hidden),
                            std::move(in.router_logits));
    }
    const int64_t M = c.hidden.shape()[0];
    progress.at(fmt::format("layer {}: preparing", layer));
    const MoE moe(c.config, *c.experts, o.backend, device);
    Buffer out(c.hidden.dtype(), {M, config.hidden});
    progress.at(fmt::format("layer {}: {} on {}, {} forwards", layer, moe.backend_name(),
                            to_string(device), o.repeats));
    const double seconds =
        run_forwards(moe, c.hidden, c.router_logits, out, device, o.repeats).median();
    const double error = sample::relative_error(out, c.reference);
    const double bound = error_bound(c.hidden.dtype());
    // Weights read: the experts the batch routes to (each read once), as stored on disk.
    const std::span<const int32_t> ids = c.topk_ids.span<int32_t>();
    const std::set<int32_t> hit(ids.begin(), ids.end());
    const double bytes = static_cast<double>(ckpt.layer_bytes(layer)) *
                         static_cast<double>(hit.size()) / static_cast<double>(config.num_experts);
    const double flops = 2.0 * static_cast<double>(M * config.top_k()) *
                         static_cast<double>(config.w13_rows() * config.hidden +
                                             config.hidden * config.intermediate);
    progress.clear();
    fmt::print(
        "layer {}: {} on {}, {} in {}: {} per forward, {}/s of weights, {:.3g} TFLOP/s, "
        "rel. error {:.2e} (bound {:.1e}){}\n",
        layer, moe.backend_name(), to_string(device), plural(M, "token", "tokens"),
        name(c.hidden.dtype()), format_seconds(seconds),
        format_bytes(static_cast<int64_t>(bytes / seconds)), flops / seconds * 1e-12, error, bound,
        error < bound ? "" : "  FAIL");
    failures += error < bound ? 0 : 1;
    if (!o.output.empty()) {
      saved.add(fmt::format("layers.{}.out", layer), format::to_st_dtype(out.dtype()),
                {M, config.hidden},
                std::span<const std::byte>(static_cast<const std::byte*>(out.data()),
                                           static_cast<size_t>(out.nbytes())));
    }
    progress.step();
  }
  if (!o.output.empty()) {
    saved.write(o.output);
    fmt::print("wrote {}\n", o.output);
  }
  progress.clear();
  for (const std::string& line : problems.lines()) fmt::print("{}\n", line);
  std::string what = problems.summary();
  if (failures > 0)
    what += (what.empty() ? "" : "; ") +
            fmt::format("{} above the error bound", plural(failures, "layer is", "layers are"));
  if (!what.empty()) throw ProblemFound{fmt::format("{}: {}", o.dir, what)};
}

void add_run(CLI::App& root) {
  auto o = std::make_shared<RunOptions>();
  CLI::App* cmd = root.add_subcommand(
      "run", "Run a checkpoint's MoE layers and report time, throughput and error");
  cmd->add_option("dir", o->dir, "Checkpoint directory")->required();
  cmd->add_option("--layers", o->layers, "Layers to run, e.g. 0,3 (default: all)")->delimiter(',');
  cmd->add_option("--tokens", o->tokens, "Random tokens per forward (ignored with --input)")
      ->capture_default_str()
      ->check(at_least(1));
  cmd->add_option("--backend", o->backend, "Backend name, or auto for the oracle's choice")
      ->capture_default_str()
      ->check(backend_name());
  cmd->add_option("--device", o->device, "auto (a GPU when present), cpu, cuda or cuda:N")
      ->capture_default_str();
  cmd->add_option("--dtype", o->dtype, "Activation dtype: auto, f32, bf16 or f16")
      ->capture_default_str();
  cmd->add_option("--input", o->input,
                  "safetensors file with 'hidden' [M, H] and optionally 'router_logits' [M, E]");
  cmd->add_option("--output", o->output, "Write each layer's output ('layers.L.out') here");
  cmd->add_option("--repeats", o->repeats, "Timed forwards per layer")
      ->capture_default_str()
      ->check(at_least(1));
  cmd->add_option("--seed", o->seed, "Random seed")->capture_default_str();
  add_open_flags(*cmd, o->open);
  add_threads_flag(*cmd);
  cmd->add_flag("--quiet", o->quiet, "No progress line");
  cmd->callback([o] { run_layers(*o); });
}

const bool registered = register_command(&add_run);

}  // namespace
}  // namespace qmoe::cli
