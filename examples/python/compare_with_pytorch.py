"""Loads a checkpoint's MoE layer with qmoe, runs it, and compares it with a plain-PyTorch MoE
written from the library's dequantized weights (softmax top-k, silu(gate) * up, weighted sum).

    python examples/python/compare_with_pytorch.py [CHECKPOINT_DIR] [--device cpu|cuda:0]
"""
import argparse
import pathlib
import sys

import torch

import qmoe

ROOT = pathlib.Path(__file__).resolve().parents[2]


def pytorch_moe(x, logits, w13, w2, top_k, renormalize):
    """The MoE in float64 PyTorch: x [M, H], w13 [E, 2I, H], w2 [E, H, I]."""
    probs = torch.softmax(logits.double(), dim=-1)
    weights, ids = probs.topk(top_k, dim=-1)
    if renormalize:
        weights = weights / weights.sum(dim=-1, keepdim=True)
    inter = w2.shape[2]
    h = torch.einsum("mkn,mn->mk", w13[ids.flatten()].double(), x.double().repeat_interleave(top_k, 0))
    a = torch.nn.functional.silu(h[:, :inter]) * h[:, inter:]
    y = torch.einsum("mhk,mk->mh", w2[ids.flatten()].double(), a)
    return (y.view(x.shape[0], top_k, -1) * weights.unsqueeze(-1)).sum(dim=1)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("checkpoint", nargs="?", default=ROOT / "tests/data/ct-library-int4-g32-asym")
    p.add_argument("--device", default="cuda:0" if torch.cuda.is_available() and qmoe.cuda_built else "cpu")
    p.add_argument("--tokens", type=int, default=16)
    a = p.parse_args()

    ckpt = qmoe.Checkpoint(a.checkpoint)
    layer = ckpt.layers[0]
    print(ckpt, "scheme", ckpt.scheme)
    moe = qmoe.MoE.from_checkpoint(ckpt, layer, device=a.device)
    print("backend", moe.backend, "| why:", *(f"{v.backend}: {v.reason or 'chosen'}" for v in moe.selection.verdicts), sep="\n  ")

    # cuda-mma runs bf16/f16 activations; the CPU backends f32 too.
    dtype = torch.bfloat16 if a.device.startswith("cuda") else torch.float32
    torch.manual_seed(0)
    x = torch.randn(a.tokens, moe.config.hidden, dtype=dtype, device=a.device)
    logits = torch.randn(a.tokens, moe.config.num_experts, device=a.device)
    out = moe(x, logits)

    experts = ckpt.load_layer(layer)
    w13 = torch.from_numpy(experts.w13.dequantize())
    w2 = torch.from_numpy(experts.w2.dequantize())
    ref = pytorch_moe(x.cpu(), logits.cpu(), w13, w2, moe.config.top_k, moe.config.routing.renormalize)
    err = ((out.cpu().double() - ref).norm() / ref.norm()).item()
    bound = 1e-2 if dtype == torch.bfloat16 else 1e-5  # bf16: a few roundings of 2^-9
    print(f"relative error vs the PyTorch MoE: {err:.2e} (bound {bound:g})")
    sys.exit(0 if err < bound else 1)


if __name__ == "__main__":
    main()
