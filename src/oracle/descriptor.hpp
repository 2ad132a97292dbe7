#pragma once
// What a backend supports, as plain data. Each backend's descriptor lives next to its code
// (src/backend/<folder>/descriptor.cpp) and is edited by the backend's owner; the oracle reads
// these fields and nothing else (src/oracle/checks.cpp turns each field into a check).
#include <cstdint>
#include <string_view>
#include <vector>

#include "qmoe/config.hpp"
#include "qmoe/device.hpp"
#include "qmoe/dtype.hpp"
#include "qmoe/oracle.hpp"
#include "qmoe/quant.hpp"

namespace qmoe {

inline constexpr int kAnyGroupDividingK = 0;  // in group_sizes: any divisor of K is fine

// A layer's weights as a backend prepares them, from the shapes alone: every byte it keeps
// (codes, scales, zero points, biases, channel orders), and how many of the code bytes only pad
// N and K to its tiles.
struct PreparedBytes {
  int64_t total = 0;
  int64_t padding = 0;
  // Of the total, the int4 codes in the order cuda-mma and cuda-wgmma share
  // (cuda/int4_code_order.hpp): a plan's second backend that holds the same reads the first's.
  int64_t shared_int4_codes = 0;
};

struct BackendDescriptor {
  std::string_view name;     // the registry name (find_backend) and the --backend spelling
  std::string_view summary;  // what it is, one line (shown by `qmoe explain`)
  // Never chosen by "auto", only when asked for by name (the emulation reference).
  bool opt_in_only = false;
  // How to get it into a build when it is not registered ("configure with CUDA (nvcc) ...").
  std::string_view build_hint;

  // Device
  DeviceKind device = DeviceKind::cpu;
  std::vector<CpuFeature> cpu_features;  // required, all of them (kind cpu)
  int min_compute_capability = 0;        // kind cuda: 80 = sm_80; 0 = no bound
  int max_compute_capability = 0;

  // Weights (checked for w13 and w2 separately)
  std::vector<int> int_bits;  // integer widths supported (empty: no integer weights)
  bool mxfp4 = false;
  bool mxfp4_activations = false;  // W4A4: activations quantized to MXFP4 before each GEMM
  // MXFP4 re-coded at one scale per 64-channel window: the largest LayerDesc::mxfp4_window_spread
  // it holds exactly; -1 = keeps every 32-block's scale (no limit).
  int mxfp4_window_spread_limit = -1;
  bool zero_points = false;              // asymmetric (explicit zero points)
  std::vector<int> group_sizes;          // kChannelwise, kAnyGroupDividingK, or exact sizes
  int group_multiple = 1;                // with kAnyGroupDividingK: groups must be multiples
  bool group_fills_whole_bytes = false;  // group size x bits must be a multiple of 8
  bool act_order = false;
  bool act_order_split_k = false;        // act-order w2 sharded on K with full-K scales (TP > 1)
  bool act_order_uneven_groups = false;  // g_idx groups need not hold group-size channels each

  // Activations
  std::vector<Activation> activations;   // activation functions implemented
  std::vector<DType> activation_dtypes;  // dtypes of hidden/out
  bool bias = false;
  bool router_weight_on_input = false;
  // The layouts its forwards take (qmoe/config.hpp): every backend takes standard; a backend
  // that lists batched_experts implements Backend::run_batched.
  std::vector<ActivationFormat> activation_formats = {ActivationFormat::standard};

  // Shapes, applied to both GEMMs ([N, K] = [w13 rows, H] and [H, I])
  int64_t n_multiple = 1;
  int64_t k_multiple = 1;
  bool group_multiple_of_k_tile = false;  // a quantization group must cover whole K tiles
  int64_t max_experts = 0;                // 0 = no limit
  int64_t max_gemm_weights = 0;           // N x K of one expert's GEMM; 0 = no limit
  int max_top_k = 0;                      // 0 = no limit

  // A large-batch partner: "auto" keeps the backend it chose and adds this one, when compatible,
  // for batches from the first size where this one's forward_us is below the chosen one's for
  // good (modelled_crossover_tokens); `qmoe tune` measures the crossover on other devices.
  bool large_batch_partner = false;
  // A model of one forward's time, in microseconds on the device its constants were measured on,
  // for `tokens` tokens of the layer, routed evenly; only ever compared with another backend's.
  // Null: not modelled (such a backend gets no plan).
  double (*forward_us)(const LayerDesc& layer, int64_t tokens) = nullptr;
  // The bytes of its prepared copy of a layer (Selection::weight_bytes; a partner's own copy is
  // PlanStep::weight_bytes). Null: not declared.
  PreparedBytes (*prepared_bytes)(const LayerDesc& layer) = nullptr;
};

// Every backend's descriptor (the priority table's entries, src/oracle/priority.cpp), and one by
// name (nullptr when unknown).
const std::vector<const BackendDescriptor*>& all_descriptors();
const BackendDescriptor* find_descriptor(std::string_view name);

}  // namespace qmoe
