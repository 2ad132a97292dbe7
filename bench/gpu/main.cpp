// moe_bench: the GPU MoE forward benchmark of docs/benchmarking.md. Per (shape, M, backend):
// numerics against an fp32 reference first (NaN-poisoned outputs), then the median time of a whole
// forward over R routing sets replayed as a CUDA graph, its floor from the two ceilings measured
// in this run, and routing + alignment timed on their own. The bf16 cuBLAS baseline runs in the
// same process; any registered qmoe backend plugs in by name.
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "backend/backend.hpp"
#include "cuda/align.hpp"
#include "cuda/cuda_check.hpp"
#include "cuda/device.hpp"
#include "cuda/routing.hpp"
#include "measure/gpu/ceilings.hpp"
#include "measure/gpu/cublas_check.hpp"
#include "measure/gpu/cublas_moe.hpp"
#include "measure/gpu/timing.hpp"
#include "measure/gpu/workload.hpp"
#include "qmoe/error.hpp"
#include "qmoe/moe.hpp"
#include "reference_check.hpp"

namespace qmoe::bench {
namespace {

constexpr const char* kBaseline = "cublas-bf16";
// docs/benchmarking.md: R = ceil(240 MB / weight bytes), in [2, 16]
constexpr double kL2FlushBytes = 240e6;
constexpr int kRouteAlignTile = 16;
// bf16 intermediates land at 3e-3..6e-3 against the float reference; four times that is a
// failure, not noise.
constexpr double kRelErrBound = 2e-2;

struct Options {
  std::vector<std::string> shapes;
  std::vector<int64_t> Ms{1, 4, 16, 64, 256, 1024, 4096, 8192};
  std::vector<std::string> backends;
  std::string scheme = benchmark_schemes().front().name;
  std::string json_path;
  double budget_ms = 250;
  int64_t check_tokens = 32;
  // MoEConfig::large_batch_backend: "auto" (the library's default), "on" or "off".
  std::string large_batch_layer = "auto";
};

// A forward of one backend on one routing set into out (bf16 [M, H]), enqueue only.
using Forward = std::function<void(const RoutingSet&, uint16_t*, cudaStream_t)>;

struct RouteAlignTimes {
  double route_us = 0, align_us = 0;
};

struct Row {
  std::string shape, backend, error;
  int64_t M = 0;
  int R = 0;
  Timing time;
  double floor_us = 0, weight_bytes = 0, rel_err = 0;
  RouteAlignTimes route_align;
  bool numerics_ok = false;
};

// Routing and alignment of each set, each timed like a forward (graph of R) and on its own, so the
// two costs can be told apart (alignment reads the set's own top-k ids).
RouteAlignTimes time_route_align(const Shape& s, const std::vector<RoutingSet>& sets,
                                 cudaStream_t stream, double budget_ms) {
  const int64_t pairs = sets[0].M * s.k;
  const AlignSizes sizes = align_sizes(pairs, s.E, kRouteAlignTile);
  DeviceBuffer w(pairs * 4), ids(pairs * 4), sorted(sizes.max_padded_rows * 4),
      tiles(sizes.max_tiles * 4), offsets((s.E + 1) * 4), total(4), rows(pairs * 4),
      workspace(sizes.workspace_bytes);
  AlignOutputs out;
  out.sorted_pair_ids = sorted.as<int32_t>();
  out.tile_experts = tiles.as<int32_t>();
  out.expert_offsets = offsets.as<int32_t>();
  out.padded_total = total.as<int32_t>();
  out.pair_rows = rows.as<int32_t>();
  RoutingConfig routing;
  routing.top_k = s.k;
  const RoutingParams params = routing_params(routing, nullptr);
  const int R = static_cast<int>(sets.size());
  RouteAlignTimes t;
  t.route_us =
      time_forwards(
          R,
          [&](int r, cudaStream_t st) {
            QMOE_CUDA_CHECK(route_topk_cuda(params, sets[r].logits.as<float>(), s.E, sets[r].M, s.E,
                                            w.as<float>(), ids.as<int32_t>(), st));
          },
          stream, budget_ms / 8)
          .median_us;
  t.align_us = time_forwards(
                   R,
                   [&](int r, cudaStream_t st) {
                     QMOE_CUDA_CHECK(align_by_expert_cuda(
                         sets[r].topk_ids.as<int32_t>(), pairs, s.E, nullptr, s.E, kRouteAlignTile,
                         workspace.data(), sizes.workspace_bytes, out, st));
                   },
                   stream, budget_ms / 8)
                   .median_us;
  return t;
}

std::string json_row(const Row& r, const Shape& s, const Ceilings& c) {
  nlohmann::json j{{"shape", r.shape},
                   {"H", s.H},
                   {"I", s.I},
                   {"E", s.E},
                   {"top_k", s.k},
                   {"M", r.M},
                   {"backend", r.backend},
                   {"R", r.R},
                   {"floor_us", r.floor_us},
                   {"weight_bytes", r.weight_bytes},
                   {"route_us", r.route_align.route_us},
                   {"align_us", r.route_align.align_us},
                   {"route_align_us", r.route_align.route_us + r.route_align.align_us},
                   {"copy_GBps", c.copy_bytes_per_s / 1e9},
                   {"bf16_TFLOPs", c.bf16_flops_per_s / 1e12}};
  if (!r.error.empty()) {
    j["error"] = r.error;
    return j.dump();
  }
  j["us"] = r.time.median_us;
  j["p10_us"] = r.time.p10_us;
  j["p90_us"] = r.time.p90_us;
  j["samples"] = r.time.samples;
  j["timing"] = r.time.graph ? "graph" : "eager";
  j["frac"] = r.floor_us / r.time.median_us;
  j["weight_GBps"] = r.weight_bytes / r.time.median_us / 1e3;
  j["rel_err"] = r.rel_err;
  j["numerics_ok"] = r.numerics_ok;
  return j.dump();
}

void print_row(const Row& r) {
  if (!r.error.empty()) {
    fmt::print("| {} | {} | {} | error: {} |\n", r.shape, r.M, r.backend, r.error);
    return;
  }
  fmt::print(
      "| {} | {} | {} | {:.1f} | {:.1f}-{:.1f} | {:.1f} | {:.2f} | {:.0f} | {:.1f} + {:.1f} | "
      "{:.1e}{} | {}{} |\n",
      r.shape, r.M, r.backend, r.time.median_us, r.time.p10_us, r.time.p90_us, r.floor_us,
      r.floor_us / r.time.median_us, r.weight_bytes / r.time.median_us / 1e3,
      r.route_align.route_us, r.route_align.align_us, r.rel_err, r.numerics_ok ? "" : " FAIL",
      r.time.graph ? "graph" : "eager", r.R > 0 ? fmt::format(" R={}", r.R) : "");
}

Row run_backend(const std::string& name, const Forward& forward, const Shape& s,
                const Experts& experts, const std::vector<RoutingSet>& sets, const Options& o,
                cudaStream_t stream) {
  Row row;
  row.shape = s.name;
  row.backend = name;
  row.M = sets[0].M;
  row.R = static_cast<int>(sets.size());
  try {
    DeviceBuffer out(row.M * s.H * 2);
    row.numerics_ok = true;
    for (size_t i = 0; i < std::min<size_t>(2, sets.size()); ++i) {
      QMOE_CUDA_CHECK(cudaMemsetAsync(out.data(), 0xff, out.bytes(), stream));  // NaN poison
      forward(sets[i], out.as<uint16_t>(), stream);
      QMOE_CUDA_CHECK(cudaStreamSynchronize(stream));
      const Numerics n = check_against_reference(s, experts, sets[i], out, o.check_tokens, stream);
      row.rel_err = std::max(row.rel_err, std::isfinite(n.rel_err) ? n.rel_err : INFINITY);
      row.numerics_ok &= n.all_finite && n.rel_err <= kRelErrBound;
    }
    row.time = time_forwards(
        row.R, [&](int r, cudaStream_t st) { forward(sets[r], out.as<uint16_t>(), st); }, stream,
        o.budget_ms);
  } catch (const Error& e) {
    row.error = e.what();
    cudaGetLastError();
  }
  return row;
}

int run(const Options& o) {
  const Scheme& scheme = find_scheme(o.scheme);
  if (const std::string why = cuda_unavailable_reason(); !why.empty()) {
    fmt::print(stderr, "moe_bench needs a CUDA GPU: {}\n", why);
    return 2;
  }
  const CudaDeviceInfo device = current_cuda_device();
  cudaStream_t stream;
  QMOE_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  cublasHandle_t handle;
  QMOE_CUBLAS_CHECK(cublasCreate(&handle));
  const Ceilings ceilings = measure_ceilings(handle, stream);
  int driver = 0;
  QMOE_CUDA_CHECK(cudaDriverGetVersion(&driver));
  const std::time_t now = std::time(nullptr);
  char date[32];
  std::strftime(date, sizeof date, "%Y-%m-%d %H:%M UTC", std::gmtime(&now));

  // JSON lines go out as rows finish, so a run cut short still leaves every finished row.
  std::FILE* json = o.json_path.empty() ? stdout : std::fopen(o.json_path.c_str(), "w");
  if (!json) throw Error(fmt::format("cannot write {}", o.json_path));
  std::vector<std::string> json_lines;  // printed after the table when there is no --json file
  auto record = [&](const std::string& line) {
    json_lines.push_back(line);
    if (json == stdout) return;
    fmt::print(json, "{}\n", line);
    std::fflush(json);
  };
  record(nlohmann::json{{"device", device.name},
                        {"sm", fmt::format("{}.{}", device.sm_major, device.sm_minor)},
                        {"sms", device.sm_count},
                        {"cuda_driver", driver},
                        {"date", date},
                        {"scheme", scheme.name},
                        {"large_batch_layer", o.large_batch_layer},
                        {"copy_GBps", ceilings.copy_bytes_per_s / 1e9},
                        {"bf16_TFLOPs", ceilings.bf16_flops_per_s / 1e12}}
             .dump());
  fmt::print("device {} (sm {}.{}, {} SMs), driver {}, {}, weights {}, large-batch layer {}\n",
             device.name, device.sm_major, device.sm_minor, device.sm_count, driver, date,
             scheme.name, o.large_batch_layer);
  fmt::print(
      "ceilings: copy {:.0f} GB/s (SM kernel, read + write), bf16 matmul {:.0f} TFLOP/s "
      "(cuBLAS 8192^3)\n\n",
      ceilings.copy_bytes_per_s / 1e9, ceilings.bf16_flops_per_s / 1e12);
  fmt::print(
      "| shape | M | backend | us | p10-p90 | floor us | frac | weight GB/s | route + align "
      "us | rel err | timing |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- "
      "| --- |\n");

  uint64_t seed = 1;
  for (const Shape& s : benchmark_shapes()) {
    if (std::find(o.shapes.begin(), o.shapes.end(), s.name) == o.shapes.end()) continue;
    const Experts experts = make_experts(s, scheme, seed++ * 7919, stream);
    // Backends other than the baseline run the real MoE on the same weights, on the device.
    std::vector<std::pair<std::string, std::unique_ptr<MoE>>> layers;
    std::vector<std::pair<std::string, std::string>> layer_errors;
    MoEConfig config = moe_config(s);
    if (o.large_batch_layer != "auto") config.large_batch_backend = o.large_batch_layer == "on";
    std::optional<QuantizedExperts> canonical;
    for (const std::string& name : o.backends) {
      if (name == kBaseline) continue;
      try {
        if (!canonical) canonical.emplace(to_canonical(experts));
        layers.emplace_back(name, std::make_unique<MoE>(config, *canonical, name,
                                                        Device{DeviceKind::cuda, device.index}));
      } catch (const Error& e) {
        layer_errors.emplace_back(name, e.what());
      }
    }
    canonical.reset();

    for (int64_t M : o.Ms) {
      std::vector<RoutingSet> sets;
      sets.push_back(make_routing_set(s, M, seed++, stream));
      const double first_bytes =
          static_cast<double>(sets[0].experts_hit * weight_bytes_per_expert(s, scheme));
      const int R = std::clamp(static_cast<int>(std::ceil(kL2FlushBytes / first_bytes)), 2, 16);
      while (static_cast<int>(sets.size()) < R)
        sets.push_back(make_routing_set(s, M, seed++, stream));
      double weight_bytes = 0;
      for (const RoutingSet& set : sets)
        weight_bytes += static_cast<double>(set.experts_hit * weight_bytes_per_expert(s, scheme));
      weight_bytes /= R;
      const double bytes =
          weight_bytes + static_cast<double>(2 * M * s.H * 2);  // + x read + out written, bf16
      const double flops = static_cast<double>(6 * M * s.k * s.H * s.I);
      const double floor_us =
          1e6 * std::max(bytes / ceilings.copy_bytes_per_s, flops / ceilings.bf16_flops_per_s);
      const RouteAlignTimes route_align = time_route_align(s, sets, stream, o.budget_ms);

      auto finish = [&](Row row) {
        row.floor_us = floor_us;
        row.weight_bytes = weight_bytes;
        row.route_align = route_align;
        print_row(row);
        std::fflush(stdout);
        record(json_row(row, s, ceilings));
      };
      if (std::find(o.backends.begin(), o.backends.end(), kBaseline) != o.backends.end()) {
        const CublasMoE baseline(handle, s, experts.w13_bf16, experts.w2_bf16, M * s.k);
        finish(run_backend(
            kBaseline,
            [&](const RoutingSet& set, uint16_t* out, cudaStream_t st) {
              baseline.forward(set, out, st);
            },
            s, experts, sets, o, stream));
      }
      for (const auto& [name, layer] : layers) {
        const MoE& moe = *layer;
        const Device dev{DeviceKind::cuda, device.index};
        finish(run_backend(
            name,
            [&](const RoutingSet& set, uint16_t* out, cudaStream_t st) {
              moe.forward_routed(TensorView(set.x.data(), DType::bf16, {set.M, s.H}, dev),
                                 TensorView(set.topk_weights.data(), DType::f32, {set.M, s.k}, dev),
                                 TensorView(set.topk_ids.data(), DType::i32, {set.M, s.k}, dev),
                                 TensorView(out, DType::bf16, {set.M, s.H}, dev), st);
            },
            s, experts, sets, o, stream));
      }
      for (const auto& [name, error] : layer_errors) {
        Row row;
        row.shape = s.name;
        row.backend = name;
        row.M = M;
        row.error = error;
        finish(row);
      }
    }
  }
  QMOE_CUBLAS_CHECK(cublasDestroy(handle));
  QMOE_CUDA_CHECK(cudaStreamDestroy(stream));

  if (json == stdout) {
    fmt::print("\n");
    for (const std::string& line : json_lines) fmt::print("{}\n", line);
  } else {
    std::fclose(json);
  }
  return 0;
}

}  // namespace
}  // namespace qmoe::bench

int main(int argc, char** argv) {
  using namespace qmoe::bench;
  Options o;
  for (const Shape& s : benchmark_shapes())
    if (s.by_default) o.shapes.push_back(s.name);
  o.backends.push_back(kBaseline);
  for (const qmoe::Backend* b : qmoe::built_backends())
    if (b->name().rfind("cuda", 0) == 0) o.backends.emplace_back(b->name());
  std::string backends_default;
  for (const auto& b : o.backends) backends_default += (backends_default.empty() ? "" : ",") + b;

  CLI::App app{"GPU MoE forward benchmark (docs/benchmarking.md method)"};
  app.add_option("--shapes", o.shapes, "layer shapes")->delimiter(',')->capture_default_str();
  app.add_option("--m", o.Ms, "token counts")->delimiter(',')->capture_default_str();
  app.add_option("--backend,--backends", o.backends,
                 fmt::format("backends by name ({} is the bf16 cuBLAS baseline)", kBaseline))
      ->delimiter(',')
      ->default_str(backends_default);
  app.add_option("--scheme", o.scheme, fmt::format("weight scheme: {}", scheme_names()))
      ->capture_default_str();
  app.add_option("--json", o.json_path, "write JSON lines here (default: after the table)");
  app.add_option("--budget-ms", o.budget_ms, "time spent sampling each row")->capture_default_str();
  app.add_option("--check-tokens", o.check_tokens, "tokens checked against the fp32 reference")
      ->capture_default_str();
  app.add_option("--large-batch-layer", o.large_batch_layer,
                 "whether each layer also prepares the large-batch backend of its plan")
      ->check(CLI::IsMember({"auto", "on", "off"}))
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  try {
    return run(o);
  } catch (const qmoe::Error& e) {
    fmt::print(stderr, "moe_bench: {}\n", e.what());
    return 1;
  }
}
