"""A drop-in nn.Module MoE block (router + quantized experts) that runs qmoe through the custom op
torch.ops.qmoe.moe_forward, so the block works under torch.compile(fullgraph=True) and inside a
CUDA graph. Needs a CUDA GPU and qmoe built with its CUDA backends.

    python examples/python/moe_block.py
"""
import torch

import qmoe


class QuantizedMoEBlock(torch.nn.Module):
    """router (a bf16 Linear) -> qmoe layer; max_tokens is the largest batch a graph may hold."""

    def __init__(self, router_weight, config, experts, device="cuda:0", max_tokens=256):
        super().__init__()
        self.router = torch.nn.Linear(config.hidden, config.num_experts, bias=False,
                                      device=device, dtype=torch.bfloat16)
        with torch.no_grad():
            self.router.weight.copy_(router_weight)
        # A serving block: the quantized experts have no gradient (the op registers no autograd
        # formula), so nothing here asks for one and torch.compile traces no backward.
        self.requires_grad_(False)
        self.moe = qmoe.MoE(config, experts, device=device, max_tokens=max_tokens)
        self.layer = self.moe.op_id  # names the layer to the custom op: a plain int

    def forward(self, hidden):  # [M, H] bf16
        return torch.ops.qmoe.moe_forward(self.layer, hidden, self.router(hidden))


def main():
    E, H, I, top_k = 64, 1024, 512, 4
    config = qmoe.MoEConfig(num_experts=E, hidden=H, intermediate=I, top_k=top_k)
    experts = qmoe.random_experts(config, qmoe.QuantScheme(bits=4, group_size=128))
    block = QuantizedMoEBlock(torch.randn(E, H) / H**0.5, config, experts)
    x = torch.randn(8, H, device="cuda", dtype=torch.bfloat16)
    eager = block(x)

    compiled = torch.compile(block, fullgraph=True)
    y_compiled = compiled(x)

    stream = torch.cuda.Stream()
    block.moe.reserve(x.shape[0], stream)
    static_x = x.clone()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        block(static_x)  # warm-up on the capture stream
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=stream):
        static_y = block(static_x)
    static_x.copy_(x)
    graph.replay()
    torch.cuda.synchronize()

    def rel(a):
        return ((a.double() - eager.double()).norm() / eager.double().norm()).item()

    print(f"backend {block.moe.backend}; relative difference to eager: torch.compile "
          f"{rel(y_compiled):.2e}, CUDA graph {rel(static_y):.2e}")
    assert rel(y_compiled) < 1e-2 and rel(static_y) < 1e-2


if __name__ == "__main__":
    main()
