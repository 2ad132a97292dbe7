// dist_bench: one MoE layer across GPUs over NCCL against the same layer on one GPU, in the same
// run. Per token count M and plan (TP 2, EP 2 with tokens replicated, EP 2 with tokens split over
// the ranks): the median time of a forward on every rank, the time the plan's collectives take
// alone on the same sizes, and the bytes each rank sends per forward. One process, a thread per
// rank (rank r on GPU r). Not a test: docs/benchmarking.md says how to read it.
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <barrier>
#include <chrono>
#include <ctime>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "cuda/cuda_check.hpp"
#include "cuda/device.hpp"
#include "cuda/device_buffer.hpp"
#include "measure/gpu/workload.hpp"
#include "qmoe/distributed.hpp"
#include "qmoe/error.hpp"
#include "qmoe/moe.hpp"

namespace qmoe::bench {
namespace {

struct Options {
  std::string shape = "deepseek-v3";
  std::string scheme = benchmark_schemes().front().name;
  std::vector<int64_t> Ms{1, 32, 256, 4096};
  int repeats = 7;     // timed batches; the median is reported
  int per_batch = 10;  // forwards per timed batch
  std::string json_path;
};

struct Plan {
  std::string name;
  ShardSpec spec;
  bool token_split = false;  // each rank holds M / world tokens (all-gather, reduce-scatter)
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Runs step(rank, stream) `per_batch` times per batch on every rank's own thread and stream, and
// returns the median over batches of the slowest rank's microseconds per step.
double time_on_ranks(int world, const Options& o,
                     const std::function<void(int, cudaStream_t)>& step) {
  std::vector<std::vector<double>> us(static_cast<size_t>(world));
  std::barrier<> together(world);
  std::vector<std::exception_ptr> errors(static_cast<size_t>(world));
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r)
    threads.emplace_back([&, r] {
      try {
        QMOE_CUDA_CHECK(cudaSetDevice(r));
        cudaStream_t stream;
        QMOE_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
        cudaEvent_t start, stop;
        QMOE_CUDA_CHECK(cudaEventCreate(&start));
        QMOE_CUDA_CHECK(cudaEventCreate(&stop));
        for (int i = 0; i < 3; ++i) step(r, stream);  // warm-up
        QMOE_CUDA_CHECK(cudaStreamSynchronize(stream));
        for (int b = 0; b < o.repeats; ++b) {
          together.arrive_and_wait();
          QMOE_CUDA_CHECK(cudaEventRecord(start, stream));
          for (int i = 0; i < o.per_batch; ++i) step(r, stream);
          QMOE_CUDA_CHECK(cudaEventRecord(stop, stream));
          QMOE_CUDA_CHECK(cudaEventSynchronize(stop));
          float ms = 0;
          QMOE_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
          us[size_t(r)].push_back(1e3 * ms / o.per_batch);
        }
        cudaEventDestroy(start);
        cudaEventDestroy(stop);
        cudaStreamDestroy(stream);
      } catch (...) {
        errors[size_t(r)] = std::current_exception();
      }
    });
  for (std::thread& t : threads) t.join();
  for (const std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);
  std::vector<double> slowest(size_t(o.repeats), 0.0);
  for (const auto& rank : us)
    for (size_t b = 0; b < rank.size(); ++b) slowest[b] = std::max(slowest[b], rank[b]);
  return median(slowest);
}

// A device copy of `bytes` bytes from `src` (any device) on the calling thread's device.
DeviceBuffer copy_here(const void* src, size_t bytes) {
  DeviceBuffer d(bytes);
  QMOE_CUDA_CHECK(cudaMemcpy(d.data(), src, bytes, cudaMemcpyDefault));
  return d;
}

int run(const Options& o) {
  if (const std::string why = cuda_unavailable_reason(); !why.empty()) {
    fmt::print(stderr, "dist_bench needs CUDA GPUs: {}\n", why);
    return 2;
  }
  if (!nccl_built()) {
    fmt::print(stderr, "dist_bench needs NCCL: {}\n", nccl_status());
    return 2;
  }
  int gpus = 0;
  QMOE_CUDA_CHECK(cudaGetDeviceCount(&gpus));
  const auto shape = std::find_if(benchmark_shapes().begin(), benchmark_shapes().end(),
                                  [&](const Shape& s) { return s.name == o.shape; });
  if (shape == benchmark_shapes().end()) throw Error(fmt::format("no shape '{}'", o.shape));
  const Shape& s = *shape;
  const Scheme& scheme = find_scheme(o.scheme);
  const MoEConfig config = moe_config(s);

  QMOE_CUDA_CHECK(cudaSetDevice(0));
  cudaStream_t stream;
  QMOE_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const QuantizedExperts experts = [&] {
    const Experts on_gpu = make_experts(s, scheme, 7919, stream);
    return to_canonical(on_gpu);
  }();
  const CudaDeviceInfo device = current_cuda_device();
  const std::time_t now = std::time(nullptr);
  char date[32];
  std::strftime(date, sizeof date, "%Y-%m-%d %H:%M UTC", std::gmtime(&now));
  fmt::print("{} x {} ({}), {}, {}; shape {} (H {}, I {}, E {}, top-{}), weights {}\n", gpus,
             device.name, device.sm_count, nccl_status(), date, s.name, s.H, s.I, s.E, s.k,
             scheme.name);
  std::FILE* json = o.json_path.empty() ? nullptr : std::fopen(o.json_path.c_str(), "w");

  std::vector<Plan> plans;
  if (gpus >= 2) {
    plans.push_back({"tp2", ShardSpec{.tp_size = 2}, false});
    plans.push_back({"ep2", ShardSpec{.ep_size = 2}, false});
    plans.push_back({"ep2-split", ShardSpec{.ep_size = 2}, true});
  } else {
    fmt::print("one GPU: only the one-GPU rows (the plans need two)\n");
  }

  // One-GPU layer and its times first; it is freed before the ranks prepare theirs.
  std::vector<double> one_gpu_us;
  {
    const MoE whole(config, experts, "auto", Device{DeviceKind::cuda, 0});
    for (int64_t M : o.Ms) {
      const RoutingSet set = make_routing_set(s, M, uint64_t(M), stream);
      DeviceBuffer out(size_t(M * s.H * 2));
      whole.reserve(M);
      const double us = time_on_ranks(1, o, [&](int, cudaStream_t st) {
        whole.forward(
            TensorView(set.x.data(), DType::bf16, {M, s.H}, Device{DeviceKind::cuda, 0}),
            TensorView(set.logits.data(), DType::f32, {M, s.E}, Device{DeviceKind::cuda, 0}),
            TensorView(out.data(), DType::bf16, {M, s.H}, Device{DeviceKind::cuda, 0}), st);
      });
      one_gpu_us.push_back(us);
    }
  }
  fmt::print(
      "\n| M | plan | backend | us per forward | collectives alone us | sent per rank | 1 GPU us "
      "| speed-up |\n| --- | --- | --- | --- | --- | --- | --- | --- |\n");
  for (size_t i = 0; i < o.Ms.size(); ++i)
    fmt::print("| {} | 1 GPU | auto | {:.1f} | - | - | {:.1f} | 1.00 |\n", o.Ms[i], one_gpu_us[i],
               one_gpu_us[i]);

  for (const Plan& plan_spec : plans) {
    const int world = plan_spec.spec.tp_size * plan_spec.spec.ep_size;
    const ShardPlan plan = plan_shards(describe(experts, config), plan_spec.spec);
    std::vector<int> devices;
    for (int r = 0; r < world; ++r) devices.push_back(r);
    const auto comms = nccl_communicators(devices);
    std::vector<std::unique_ptr<ShardedMoE>> ranks(static_cast<size_t>(world));
    for (int r = 0; r < world; ++r) {
      QMOE_CUDA_CHECK(cudaSetDevice(r));
      ranks[size_t(r)] = std::make_unique<ShardedMoE>(config, experts, plan, *comms[size_t(r)],
                                                      "auto", Device{DeviceKind::cuda, r});
    }
    for (size_t i = 0; i < o.Ms.size(); ++i) {
      const int64_t M = o.Ms[i];
      if (plan_spec.token_split && M % world != 0) continue;
      const int64_t n = plan_spec.token_split ? M / world : M;  // tokens a rank holds
      QMOE_CUDA_CHECK(cudaSetDevice(0));
      const RoutingSet set = make_routing_set(s, M, uint64_t(M), stream);
      QMOE_CUDA_CHECK(cudaStreamSynchronize(stream));
      struct RankData {
        DeviceBuffer x, logits, out, scratch;
      };
      std::vector<RankData> data(static_cast<size_t>(world));
      for (int r = 0; r < world; ++r) {
        QMOE_CUDA_CHECK(cudaSetDevice(r));
        const int64_t first = plan_spec.token_split ? r * n : 0;
        RankData& d = data[size_t(r)];
        d.x = copy_here(set.x.as<uint16_t>() + first * s.H, size_t(n * s.H * 2));
        d.logits = copy_here(set.logits.as<float>() + first * s.E, size_t(n * s.E * 4));
        d.out = DeviceBuffer(size_t(n * s.H * 2));
        d.scratch = DeviceBuffer(size_t(M * s.H * 2));
        ranks[size_t(r)]->reserve(M);
      }
      auto view = [&](const DeviceBuffer& b, DType t, int64_t rows, int64_t cols, int r) {
        return TensorView(b.data(), t, {rows, cols}, Device{DeviceKind::cuda, r});
      };
      const double us = time_on_ranks(world, o, [&](int r, cudaStream_t st) {
        const RankData& d = data[size_t(r)];
        const ShardedMoE& rank = *ranks[size_t(r)];
        const TensorView x = view(d.x, DType::bf16, n, s.H, r),
                         logits = view(d.logits, DType::f32, n, s.E, r),
                         out = view(d.out, DType::bf16, n, s.H, r);
        if (plan_spec.token_split)
          rank.forward_token_split(x, logits, out, st);
        else
          rank.forward(x, logits, out, st);
      });
      // The same collectives alone, on buffers of the forward's sizes.
      const double comm_us = time_on_ranks(world, o, [&](int r, cudaStream_t st) {
        const RankData& d = data[size_t(r)];
        Communicator& c = *comms[size_t(r)];
        if (plan_spec.token_split) {
          c.all_gather(view(d.x, DType::bf16, n, s.H, r), view(d.scratch, DType::bf16, M, s.H, r),
                       st);
          c.reduce_scatter_sum(view(d.scratch, DType::bf16, M, s.H, r),
                               view(d.out, DType::bf16, n, s.H, r), st);
        } else {
          c.all_reduce_sum(view(d.out, DType::bf16, n, s.H, r), st);
        }
      });
      // Ring collectives: an all-reduce of B bytes sends 2 (W-1)/W B per rank; all-gather and
      // reduce-scatter of a B-byte whole send (W-1)/W B each. Logits (f32 [n, E]) are gathered
      // too in the split form.
      const double w = world, whole_bytes = double(M * s.H * 2);
      const double sent = plan_spec.token_split
                              ? (w - 1) / w * (2 * whole_bytes + double(M * s.E * 4))
                              : 2 * (w - 1) / w * whole_bytes;
      const std::string backend(ranks[0]->local().backend_for(M, DType::bf16));
      fmt::print("| {} | {} | {} | {:.1f} | {:.1f} | {:.1f} KB | {:.1f} | {:.2f} |\n", M,
                 plan_spec.name, backend, us, comm_us, sent / 1e3, one_gpu_us[i],
                 one_gpu_us[i] / us);
      std::fflush(stdout);
      if (json)
        fmt::print(json, "{}\n",
                   nlohmann::json{{"device", device.name},
                                  {"gpus", world},
                                  {"date", date},
                                  {"shape", s.name},
                                  {"scheme", scheme.name},
                                  {"M", M},
                                  {"plan", plan_spec.name},
                                  {"backend", backend},
                                  {"us", us},
                                  {"collectives_us", comm_us},
                                  {"sent_bytes_per_rank", sent},
                                  {"one_gpu_us", one_gpu_us[i]}}
                       .dump());
    }
  }
  if (json) std::fclose(json);
  return 0;
}

}  // namespace
}  // namespace qmoe::bench

int main(int argc, char** argv) {
  qmoe::bench::Options o;
  CLI::App app("dist_bench: one MoE layer over NCCL ranks (one GPU each) vs one GPU");
  app.add_option("--shape", o.shape, "Layer shape (moe_bench's names)")->capture_default_str();
  app.add_option("--scheme", o.scheme, "Weight scheme")->capture_default_str();
  app.add_option("--tokens", o.Ms, "Token counts")->delimiter(',');
  app.add_option("--repeats", o.repeats, "Timed batches (median reported)")->capture_default_str();
  app.add_option("--json", o.json_path, "Also write one JSON line per row here");
  CLI11_PARSE(app, argc, argv);
  try {
    return qmoe::bench::run(o);
  } catch (const qmoe::Error& e) {
    fmt::print(stderr, "dist_bench: {}\n", e.what());
    return 1;
  }
}
