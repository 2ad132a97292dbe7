#pragma once
// Hugging Face-style model directories (config.json + *.safetensors) holding weight-only quantized
// MoE experts, read into the canonical QuantizedExperts and written back from it.
//
//   auto ckpt = qmoe::Checkpoint::open("models/qwen-moe-gptq");
//   for (int layer : ckpt.moe_layers()) {
//     qmoe::QuantizedExperts experts = ckpt.load_layer(layer);
//     qmoe::MoE moe(ckpt.layer_config(layer), experts);
//   }
//
// Formats: GPTQ (v1 and v2 zero points), AWQ (gemm), compressed-tensors pack-quantized, vLLM's
// moe_wna16 reading of GPTQ/AWQ checkpoints, gpt-oss MXFP4 and AMD Quark's OCP MXFP4. Every format
// quirk ends in the adapter.
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "qmoe/config.hpp"
#include "qmoe/quant.hpp"

namespace qmoe {

enum class CheckpointFormat : uint8_t {
  gptq,                // quant_method "gptq" (AutoGPTQ / GPTQModel / AutoRound)
  awq,                 // quant_method "awq", version "gemm" (AutoAWQ)
  compressed_tensors,  // quant_method "compressed-tensors", format "pack-quantized"
  moe_wna16,           // a GPTQ or AWQ checkpoint read under vLLM's moe_wna16 rules
  mxfp4,               // quant_method "mxfp4" (gpt-oss): fused e2m1 experts, e8m0 scales
  quark,               // quant_method "quark" (AMD Quark): OCP MXFP4 experts, W4A16 or W4A4
};

// "gptq", "awq", "compressed-tensors", "moe_wna16", "mxfp4", "quark"
std::string_view name(CheckpointFormat f);
CheckpointFormat parse_checkpoint_format(std::string_view s);  // throws Error listing valid names

// How per-expert modules are named under `model.layers.{L}.`.
enum class ExpertNaming : uint8_t {
  mixtral,  // block_sparse_moe.experts.{j}.w1 (gate) / w3 (up) / w2 (down)
  qwen,     // mlp.experts.{j}.gate_proj / up_proj / down_proj (Qwen-MoE, DeepSeek, ...)
  gpt_oss,  // fused: mlp.experts.gate_up_proj_* [E, 2I, ...] (gate/up rows interleaved) and
            // mlp.experts.down_proj_* [E, H, ...]; router mlp.router
};

struct OpenOptions {
  // Read a GPTQ/AWQ checkpoint the way vLLM's `--quantization moe_wna16` does: GPTQ without
  // desc_act (int4/int8, sym or asym, any group size), AWQ int4. format() then says "moe_wna16".
  bool as_moe_wna16 = false;
  // Refuse a GPTQ v1 ("gptq") layer whose qzeros AutoGPTQ overflowed: its packer stores z - 1
  // unmasked, so a zero point of 0 overwrites the zero points above it in its 32-bit word, and
  // those are lost. load_layer then throws an Error naming the tensor, the group and the output
  // channels. Without it such a layer loads with the lost zero points read as 0 (the value the
  // bits give under the v1 rule), and `inspect` reports them.
  bool strict_zeros = false;
};

// Part of one layer's experts, as one rank of a tensor- and expert-parallel plan needs it
// (qmoe/shard.hpp): experts [first_expert, first_expert + num_experts) and of each the intermediate
// channels [first_channel, first_channel + channels) (channels 0: all of them). That is w13's gate
// and up rows of those channels with their scales, zero points and bias, and w2's K slice of them
// with its scales, zero points and g_idx; act-order w2 keeps the scales and zero points of the
// whole K (QuantizedWeight::K_full). w2's bias only with w2_bias (in a TP group, tp_rank 0 adds
// it).
struct ExpertSlice {
  int64_t first_expert = 0, num_experts = 0;
  int64_t first_channel = 0, channels = 0;
  bool w2_bias = true;
};

class Checkpoint {
 public:
  // Reads config.json and the safetensors headers (memory-mapped; no tensor data is copied until
  // load_layer). Throws Error naming the file and the rule on anything malformed or unsupported.
  static Checkpoint open(const std::filesystem::path& dir, const OpenOptions& options = {});

  Checkpoint(Checkpoint&&) noexcept;
  Checkpoint& operator=(Checkpoint&&) noexcept;
  ~Checkpoint();

  const std::filesystem::path& dir() const;
  CheckpointFormat format_kind() const;
  std::string_view format() const { return name(format_kind()); }
  // The experts' scheme; scheme().source_scale_dtype is the dtype the scales were stored in.
  const QuantScheme& scheme() const;
  // Experts, top-k, hidden, intermediate (moe_intermediate_size where present), routing,
  // activation, and whether the expert projections carry biases.
  const MoEConfig& moe_config() const;
  ExpertNaming naming() const;
  std::string_view model_type() const;  // config.json "model_type", may be empty
  // Layers that hold quantized experts, ascending.
  std::vector<int> moe_layers() const;
  // Layers config.json declares as MoE layers that hold no experts in the files (a checkpoint
  // missing a shard, or cut short), ascending; empty when all are there.
  std::vector<int> missing_layers() const;
  // Bytes the layer's expert tensors occupy in the checkpoint files.
  int64_t layer_bytes(int layer) const;
  // One layer's experts in canonical form (validated). Throws Error for a layer without experts,
  // a missing expert or projection, inconsistent shapes, or a quantized router (the router must
  // stay in float).
  QuantizedExperts load_layer(int layer) const;
  // Part of one layer (expert e becomes e - first_expert), reading only the bytes of the files that
  // hold it: the experts' tensors (for gpt-oss's fused [E, ...] tensors, the experts' rows) and of
  // those, for a channel slice, the rows or the runs of columns that hold the channels. Equal, bit
  // for bit, to cutting the part out of load_layer. Throws Error when the channel slice would cut
  // a packed 32-bit word or a quantization group of the stored tensors, naming the sizes that work.
  // load_shard (qmoe/distributed.hpp) reads a rank's shard with it.
  QuantizedExperts load_experts(int layer, const ExpertSlice& slice) const;
  // All channels of experts [first, first + count).
  QuantizedExperts load_experts(int layer, int64_t first, int64_t count) const;
  // Bytes of the checkpoint's tensors load_experts reads for `slice`, computed (nothing is read).
  int64_t experts_bytes(int layer, const ExpertSlice& slice) const;
  int64_t experts_bytes(int layer, int64_t first, int64_t count) const;
  // Bytes of expert tensors this Checkpoint's loads have read so far, from every thread: what
  // experts_bytes says, measured.
  int64_t bytes_read() const;
  // moe_config() plus what one layer stores beside its experts: the router's score correction
  // bias (DeepSeek-V3 `mlp.gate.e_score_correction_bias`, [E]) when present.
  MoEConfig layer_config(int layer) const;

 private:
  struct Impl;
  explicit Checkpoint(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

struct WriteOptions {
  CheckpointFormat format = CheckpointFormat::gptq;
  ExpertNaming naming = ExpertNaming::qwen;
  int gptq_version = 1;  // GPTQ qzeros hold z - 1 (v1, "gptq") or z (v2, "gptq_v2")
  // Scales and biases: f16, bf16 or f32; a value that would round is an error. (mxfp4 scales are
  // always e8m0 bytes; this then applies to the biases only.)
  DType scale_dtype = DType::f16;
  int64_t max_shard_bytes = 0;  // > 0: several files plus model.safetensors.index.json
  std::string model_type = "qwen2_moe";
};

// Writes config.json and the safetensors file(s) for `layers` (one QuantizedExperts per MoE layer,
// numbered 0..n-1), so that Checkpoint::open(dir).load_layer(L) returns them bit-identically.
// Throws Error when the format cannot hold the scheme (e.g. AWQ int8 or act-order).
void write_checkpoint(const std::filesystem::path& dir, const MoEConfig& config,
                      std::span<const QuantizedExperts> layers, const WriteOptions& options);

}  // namespace qmoe
