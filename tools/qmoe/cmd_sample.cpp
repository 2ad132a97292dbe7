// `qmoe sample --format F [--scheme S] DIR`: writes a small example checkpoint (random experts
// quantized with the reference quantizer) to try `inspect`, `explain`, `verify` and `run` on.
#include <fmt/format.h>

#include <filesystem>
#include <random>
#include <utility>
#include <vector>

#include "command.hpp"
#include "flag_checks.hpp"
#include "format/adapter.hpp"
#include "format/projection.hpp"
#include "qmoe/checkpoint.hpp"
#include "sample/random_moe.hpp"
#include "scheme_flag.hpp"
#include "units.hpp"

namespace qmoe::cli {
namespace {

struct SampleOptions {
  std::string dir;
  std::string format = "gptq";
  std::string scheme;  // empty: the format's usual scheme
  int layers = 2;
  int64_t experts = 8, hidden = 512, intermediate = 256;
  int top_k = 2;
  uint64_t seed = 2026;
  bool force = false;  // replace a checkpoint already in dir
};

// The files of a checkpoint in dir (config.json, *.safetensors, the index), nothing else.
std::vector<std::filesystem::path> checkpoint_files(const std::filesystem::path& dir) {
  std::vector<std::filesystem::path> files;
  if (!std::filesystem::is_directory(dir)) return files;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const std::filesystem::path& p = entry.path();
    if (p.filename() == "config.json" || p.filename() == "model.safetensors.index.json" ||
        p.extension() == ".safetensors")
      files.push_back(p);
  }
  return files;
}

// The format's own writer, given one expert of the layer in memory, refuses a scheme or a shape
// the format cannot store before anything is created on disk. (mxfp4 stores its experts fused,
// without an adapter; the scheme checks above are all its rules.)
void check_format_stores(const QuantizedExperts& layer, const WriteOptions& options,
                         const SampleOptions& o, const std::string& scheme_text) {
  if (options.format == CheckpointFormat::mxfp4) return;
  const format::FormatAdapter& adapter = format::adapter_for(options.format);
  format::SafetensorsWriter scratch;
  const std::pair<const char*, const QuantizedWeight*> projections[] = {{"gate_proj", &layer.w13()},
                                                                        {"down_proj", &layer.w2()}};
  try {
    for (const auto& [module, w] : projections) {
      const int64_t rows = w == &layer.w13() ? o.intermediate : w->N;
      const format::ProjectionSpec spec{module, rows, w->K, w->scheme, options.gptq_version};
      adapter.write(scratch, spec, format::slice_projection(*w, 0, 0, rows), options);
    }
  } catch (const Error& e) {
    usage_error("--format {} cannot store --scheme {} (--hidden {}, --intermediate {}): {}",
                o.format, scheme_text, o.hidden, o.intermediate, e.what());
  }
}

std::string default_scheme(CheckpointFormat f) {
  switch (f) {
    case CheckpointFormat::awq: return "int4-g128-asym";
    case CheckpointFormat::mxfp4:
    case CheckpointFormat::quark: return "mxfp4";
    default: return "int4-g128";
  }
}

MoEConfig sample_config(const SampleOptions& o, bool gpt_oss) {
  MoEConfig c;
  c.num_experts = o.experts;
  c.hidden = o.hidden;
  c.intermediate = o.intermediate;
  c.routing.top_k = o.top_k;
  c.routing.renormalize = true;
  if (gpt_oss) {
    c.activation = Activation::swigluoai_uninterleave;
    c.activation_params = ActivationParams{.alpha = 1.702f, .limit = 7.0f, .beta = 1.0f};
    c.w13_bias = c.w2_bias = true;
  }
  validate(c);
  return c;
}

void run_sample(const SampleOptions& o) {
  const CheckpointFormat format = parse_flag([&] { return parse_checkpoint_format(o.format); });
  const bool wna16 = format == CheckpointFormat::moe_wna16;
  const bool mxfp4 = format == CheckpointFormat::mxfp4;
  const std::string scheme_text = o.scheme.empty() ? default_scheme(format) : o.scheme;
  const QuantScheme scheme = parse_scheme_flag(scheme_text);
  const bool mx_format = mxfp4 || format == CheckpointFormat::quark;
  if (mx_format != (scheme.kind == WeightKind::mxfp4))
    usage_error(
        "--scheme {} does not go with --format {} (mxfp4 weights go with the mxfp4 and quark "
        "formats, integer weights with the others)",
        scheme_text, o.format);
  if (scheme.activation_quant != ActivationQuant::none && format != CheckpointFormat::quark)
    usage_error("--scheme {}: MXFP4 activations (W4A4) are stored by --format quark only",
                scheme_text);
  if (wna16 && scheme.act_order)
    usage_error("--format moe_wna16 reads GPTQ without act-order; drop -act-order");
  const MoEConfig config = parse_flag([&] { return sample_config(o, mxfp4); });
  parse_flag([&] { validate(scheme); });
  for (const int64_t K : {config.hidden, config.intermediate}) {
    if (K % scheme.group_size_for(K) != 0)
      usage_error(
          "--scheme {}: the group size {} must divide both --hidden {} and --intermediate {}",
          scheme_text, scheme.group_size_for(K), config.hidden, config.intermediate);
  }

  WriteOptions options;
  options.format = wna16 ? CheckpointFormat::gptq : format;
  // Scales and biases as real checkpoints store them: f16, and bf16 for gpt-oss.
  options.scale_dtype = mxfp4 ? DType::bf16 : DType::f16;
  if (mxfp4) {
    options.naming = ExpertNaming::gpt_oss;
    options.model_type = "gpt_oss";
  }
  if (!o.force && !checkpoint_files(o.dir).empty())
    usage_error("{} already holds a checkpoint; give --force to replace it", o.dir);
  std::mt19937_64 rng(o.seed);
  std::vector<QuantizedExperts> layers;
  for (int l = 0; l < o.layers; ++l) {
    QuantizedWeight w13 = sample::random_weight(config.num_experts, config.w13_rows(),
                                                config.hidden, scheme, config.w13_bias, rng);
    QuantizedWeight w2 = sample::random_weight(config.num_experts, config.hidden,
                                               config.intermediate, scheme, config.w2_bias, rng);
    for (QuantizedWeight* w : {&w13, &w2}) {
      if (scheme.kind != WeightKind::mxfp4) sample::round_to_dtype(w->scales, options.scale_dtype);
      if (w->has_bias()) sample::round_to_dtype(w->bias, options.scale_dtype);
    }
    layers.emplace_back(std::move(w13), std::move(w2));
    if (l == 0) check_format_stores(layers.front(), options, o, scheme_text);
  }
  for (const std::filesystem::path& file : checkpoint_files(o.dir)) std::filesystem::remove(file);
  write_checkpoint(o.dir, config, layers, options);

  int64_t bytes = 0;
  for (const auto& entry : std::filesystem::directory_iterator(o.dir))
    if (entry.is_regular_file()) bytes += static_cast<int64_t>(entry.file_size());
  fmt::print("wrote {}: {} checkpoint, {}, {} of {} experts (H={}, I={}, top-{}), {}\n", o.dir,
             name(options.format), to_string(scheme), plural(o.layers, "layer", "layers"),
             config.num_experts, config.hidden, config.intermediate, config.routing.top_k,
             format_bytes(bytes));
  const std::string read_as = wna16 ? " --moe-wna16" : "";
  fmt::print(
      "next: qmoe inspect {0}{1}; qmoe explain {0}{1}; qmoe verify {0}{1}; qmoe run {0}{1}\n",
      o.dir, read_as);
}

void add_sample(CLI::App& root) {
  auto o = std::make_shared<SampleOptions>();
  CLI::App* cmd =
      root.add_subcommand("sample", "Write a small example checkpoint of random quantized experts");
  cmd->add_option("dir", o->dir, "Directory to create (must not hold a checkpoint)")->required();
  cmd->add_option("--format", o->format, "gptq, awq, compressed-tensors, moe_wna16, mxfp4 or quark")
      ->capture_default_str();
  cmd->add_option("--scheme", o->scheme,
                  "int4-g128, int8-g32-asym, int4-channelwise, int4-g128-act-order, mxfp4, "
                  "mxfp4-w4a4, mxfp4-w4a4-even (quark), ... "
                  "(default: the format's usual one)");
  cmd->add_option("--layers", o->layers, "MoE layers")
      ->capture_default_str()
      ->check(between(1, 64));
  cmd->add_option("--experts", o->experts, "Experts per layer")->capture_default_str();
  cmd->add_option("--hidden", o->hidden, "Hidden size H")->capture_default_str();
  cmd->add_option("--intermediate", o->intermediate, "Expert intermediate size I")
      ->capture_default_str();
  cmd->add_option("--top-k", o->top_k, "Experts per token")->capture_default_str();
  cmd->add_option("--seed", o->seed, "Random seed")->capture_default_str();
  cmd->add_flag("--force", o->force, "Replace a checkpoint already in DIR");
  cmd->callback([o] { run_sample(*o); });
}

const bool registered = register_command(&add_sample);

}  // namespace
}  // namespace qmoe::cli
