"""A float64 NumPy MoE, written from the definitions (softmax top-k routing, silu(gate) * up,
weighted sum), independent of qmoe's code: the truth the tests compare qmoe against."""
import json
import pathlib
import struct

import numpy as np


def route(logits, top_k, renormalize=True):
    """Softmax over experts, the top_k largest, optionally renormalized to sum 1."""
    z = np.asarray(logits, dtype=np.float64)
    p = np.exp(z - z.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    ids = np.argsort(-p, axis=1, kind="stable")[:, :top_k]
    weights = np.take_along_axis(p, ids, axis=1)
    if renormalize:
        weights /= weights.sum(axis=1, keepdims=True)
    return weights, ids


def moe(x, w13, w2, weights, ids):
    """x [M, H]; w13 [E, 2I, H] (gate rows then up rows); w2 [E, H, I]."""
    x = np.asarray(x, dtype=np.float64)
    inter = w2.shape[2]
    out = np.zeros_like(x)
    for m in range(x.shape[0]):
        for w, e in zip(weights[m], ids[m]):
            h = w13[e].astype(np.float64) @ x[m]
            gate, up = h[:inter], h[inter:]
            a = gate / (1.0 + np.exp(-gate)) * up
            out[m] += w * (w2[e].astype(np.float64) @ a)
    return out


def relative_error(out, ref):
    out = np.asarray(out, dtype=np.float64)
    return float(np.linalg.norm(out - ref) / np.linalg.norm(ref))


NUMPY_DTYPES = {"F32": np.float32, "F16": np.float16, "I32": np.int32, "I64": np.int64, "U8": np.uint8}


def read_safetensors(path):
    """Every tensor of a safetensors file (of the dtypes above), by name."""
    blob = pathlib.Path(path).read_bytes()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8 : 8 + n])
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        dtype = NUMPY_DTYPES[info["dtype"]]
        tensors[name] = np.frombuffer(blob[8 + n + begin : 8 + n + end], dtype=dtype).reshape(
            info["shape"]
        )
    return tensors


def stacked_reference_weights(path, layer, num_experts):
    """w13 [E, 2I, H] and w2 [E, H, I] from per-expert gate/up/down float weights."""
    t = read_safetensors(path)
    prefix = f"model.layers.{layer}.mlp.experts"
    w13 = np.stack(
        [
            np.concatenate([t[f"{prefix}.{e}.gate_proj.weight"], t[f"{prefix}.{e}.up_proj.weight"]])
            for e in range(num_experts)
        ]
    )
    w2 = np.stack([t[f"{prefix}.{e}.down_proj.weight"] for e in range(num_experts)])
    return w13, w2
