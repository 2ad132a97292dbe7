"""Python-call overhead of qmoe per forward against the C++ call, on a CUDA GPU, at the
Qwen3-30B-A3B MoE shape (H 2048, I 768, E 128, top-8, int4 g128, bf16) and M = 1 by default.

Eager: host time per forward of a loop of calls (no synchronisation inside the loop), median
of repeats, for
  cpp        MoE::forward called from a C++ loop (the baseline)
  core       qmoe._qmoe.MoE.forward_described (the binding, tensors described by hand)
  moe()      qmoe.MoE.__call__ with torch tensors (what users call)
  torch.ops  torch.ops.qmoe.moe_forward (the custom op; allocates its output)
The difference to `cpp` is the Python overhead (target: <= 3 us for moe()).
Graph: GPU time per forward of a CUDA graph of forwards captured from C++ and one captured
through moe() by torch.cuda.graph (target: equal).

    python bench/python/overhead.py [--m 1] [--calls 100] [--json FILE]
"""
import argparse
import json
import statistics
import time

import torch

import qmoe
from qmoe import _qmoe, _tensors


def median_host_us(fn, calls, repeats):
    times = []
    for _ in range(repeats):
        torch.cuda.synchronize()
        start = time.perf_counter()
        fn(calls)
        times.append((time.perf_counter() - start) / calls * 1e6)
    torch.cuda.synchronize()
    return statistics.median(times)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--m", type=int, default=1)
    p.add_argument("--calls", type=int, default=100)  # few enough not to fill the launch queue
    p.add_argument("--repeats", type=int, default=50)
    p.add_argument("--per-graph", type=int, default=50)
    p.add_argument("--replays", type=int, default=40)
    p.add_argument("--json")
    a = p.parse_args()
    E, H, I, top_k = 128, 2048, 768, 8
    config = qmoe.MoEConfig(num_experts=E, hidden=H, intermediate=I, top_k=top_k)
    experts = qmoe.random_experts(config, qmoe.QuantScheme(bits=4, group_size=128))
    moe = qmoe.MoE(config, experts, device="cuda:0", backend="cuda-mma")
    stream = torch.cuda.Stream()
    moe.reserve(a.m, stream)
    x = torch.randn(a.m, H, device="cuda", dtype=torch.bfloat16)
    logits = torch.randn(a.m, E, device="cuda", dtype=torch.float32)
    out = torch.empty_like(x)
    dx, dl, do = (_tensors.describe(t, n) for t, n in ((x, "x"), (logits, "l"), (out, "o")))
    s = stream.cuda_stream
    core = moe._core
    op = torch.ops.qmoe.moe_forward
    layer = moe.op_id

    def loop(call):
        def run(n):
            for _ in range(n):
                call()
        return run

    rows = {}
    with torch.cuda.stream(stream):
        for _ in range(3):  # warm-up: plans, occupancy queries, the op's registration
            moe(x, logits, out)
            op(layer, x, logits)
        torch.cuda.synchronize()
        rows["cpp"] = statistics.median(
            _qmoe._bench_host_seconds_per_forward(core, dx, dl, do, s, a.calls) * 1e6
            for _ in range(a.repeats))
        torch.cuda.synchronize()
        rows["core"] = median_host_us(loop(lambda: core.forward_described(dx, dl, do, s)),
                                      a.calls, a.repeats)
        rows["moe()"] = median_host_us(loop(lambda: moe(x, logits, out)), a.calls, a.repeats)
        rows["torch.ops"] = median_host_us(loop(lambda: op(layer, x, logits)), a.calls, a.repeats)

    graph_cpp = _qmoe._bench_graph_ms_per_forward(core, dx, dl, do, s, a.per_graph, a.replays)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=stream):
        for _ in range(a.per_graph):
            moe(x, logits, out)
    graph.replay()
    begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    with torch.cuda.stream(stream):
        begin.record()
        for _ in range(a.replays):
            graph.replay()
        end.record()
    end.synchronize()
    graph_py = begin.elapsed_time(end) / (a.replays * a.per_graph)

    device = torch.cuda.get_device_name()
    print(f"qmoe Python overhead, {device}, Qwen3-30B-A3B MoE (H {H}, I {I}, E {E}, top-{top_k}, "
          f"int4 g128, bf16), M = {a.m}, torch {torch.__version__}")
    print(f"{'path':<10} {'host us/forward':>16} {'over cpp':>10}")
    for name, us in rows.items():
        print(f"{name:<10} {us:16.2f} {us - rows['cpp']:10.2f}")
    print(f"graph GPU time per forward: C++-captured {graph_cpp * 1e3:.2f} us, "
          f"moe()-captured {graph_py * 1e3:.2f} us (ratio {graph_py / graph_cpp:.3f})")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"device": device, "m": a.m, "host_us": rows,
                       "graph_us_cpp": graph_cpp * 1e3, "graph_us_python": graph_py * 1e3,
                       "torch": torch.__version__, "date": time.strftime("%Y-%m-%d")}, f, indent=1)


if __name__ == "__main__":
    main()
