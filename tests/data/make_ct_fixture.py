#!/usr/bin/env python3
"""Writes the compressed-tensors fixtures whose packed tensors come from the library itself.

Run by hand (never in CI; the build machines carry no PyTorch), in a throwaway virtualenv:

    python3 -m venv /tmp/ctvenv
    /tmp/ctvenv/bin/pip install torch compressed-tensors safetensors numpy
    /tmp/ctvenv/bin/python tests/data/make_ct_fixture.py tests/data

Last run with compressed-tensors 0.20.1, torch 2.15.0, safetensors 0.8.0, numpy 2.4.6.

Each fixture is one Qwen-MoE layer (E = 4, H = 64, I = 32, float router `mlp.gate`). The
library does every quantization step: apply_quantization_config attaches the scheme,
compute_dynamic_scales_and_zp computes min-max scales and zero points per group (the same
calculate_qparams that llm-compressor's observers end in), ModelCompressor.compress_model
quantizes and packs (pack_to_int32), and ModelCompressor.update_config writes config.json's
quantization_config. The state dict is saved as safetensors, as save_pretrained would.

reference/dequantized.safetensors holds, per projection, the library's own decompression
(PackedQuantizationCompressor.decompress: unpack_from_int32 + dequantize) of exactly the tensors
saved in model.safetensors, with the scales widened to float32 first: (q - z) * s of a 4-bit
integer and a 16-bit float is exact in float32, so qmoe must match it bit for bit. (Decompressing
in the scales' own 16-bit dtype would round the product.) It sits in a subfolder so that the
checkpoint reader, which takes every *.safetensors in the model folder, does not see it.
"""
import json
import pathlib
import sys

import compressed_tensors
import numpy
import safetensors
import torch
from compressed_tensors.compressors import ModelCompressor
from compressed_tensors.compressors.pack_quantized import PackedQuantizationCompressor
from compressed_tensors.quantization import (
    QuantizationArgs,
    QuantizationConfig,
    QuantizationScheme,
    QuantizationStatus,
    apply_quantization_config,
)
from compressed_tensors.quantization.utils import compute_dynamic_scales_and_zp
from safetensors.torch import save_file

E, H, I, TOP_K = 4, 64, 32, 2
PROJECTIONS = {"gate_proj": (I, H), "up_proj": (I, H), "down_proj": (H, I)}


class Experts(torch.nn.Module):
    def __init__(self, dtype):
        super().__init__()
        for name, (n, k) in PROJECTIONS.items():
            setattr(self, name, torch.nn.Linear(k, n, bias=False, dtype=dtype))


class TinyQwenMoe(torch.nn.Module):
    """model.layers.0.mlp.{gate, experts.j.*_proj}: the names a Qwen-MoE checkpoint uses."""

    def __init__(self, dtype):
        super().__init__()
        mlp = torch.nn.Module()
        mlp.gate = torch.nn.Linear(H, E, bias=False, dtype=dtype)
        mlp.experts = torch.nn.ModuleList(Experts(dtype) for _ in range(E))
        layer = torch.nn.Module()
        layer.mlp = mlp
        self.model = torch.nn.Module()
        self.model.layers = torch.nn.ModuleList([layer])


def model_config():
    return {
        "model_type": "qwen2_moe",
        "hidden_size": H,
        "intermediate_size": I,
        "moe_intermediate_size": I,
        "num_experts": E,
        "num_experts_per_tok": TOP_K,
        "num_hidden_layers": 1,
        "hidden_act": "silu",
        "norm_topk_prob": True,
    }


def make_fixture(out_dir, dtype, symmetric, seed):
    torch.manual_seed(seed)
    model = TinyQwenMoe(dtype)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn_like(p, dtype=torch.float32).to(dtype) * 0.05)

    weights = QuantizationArgs(
        num_bits=4, type="int", symmetric=symmetric, strategy="group", group_size=32
    )
    config = QuantizationConfig(
        config_groups={"group_0": QuantizationScheme(targets=["Linear"], weights=weights)},
        ignore=["re:.*mlp.gate$"],
        quantization_status=QuantizationStatus.INITIALIZED,
    )
    apply_quantization_config(model, config)
    for module in model.modules():
        scheme = getattr(module, "quantization_scheme", None)
        if scheme is None:
            continue
        scale, zero = compute_dynamic_scales_and_zp(module.weight.data, scheme.weights, module)
        module.weight_scale.data.copy_(scale)
        if hasattr(module, "weight_zero_point"):
            module.weight_zero_point.data.copy_(zero)

    compressor = ModelCompressor.from_pretrained_model(model, quantization_format="pack-quantized")
    compressor.compress_model(model)

    out_dir.mkdir(parents=True, exist_ok=True)
    state = {k: v.contiguous() for k, v in model.state_dict().items()}
    save_file(state, str(out_dir / "model.safetensors"), metadata={"format": "pt"})
    (out_dir / "config.json").write_text(json.dumps(model_config(), indent=2) + "\n")
    compressor.update_config(str(out_dir))

    scheme = QuantizationScheme(targets=["Linear"], weights=weights)
    saved = safetensors.torch.load_file(str(out_dir / "model.safetensors"))
    reference = {}
    for j in range(E):
        for name in PROJECTIONS:
            module = f"model.layers.0.mlp.experts.{j}.{name}"
            local = {k[len(module) + 1 :]: v for k, v in saved.items() if k.startswith(module + ".")}
            local["weight_scale"] = local["weight_scale"].float()
            reference[module + ".weight"] = PackedQuantizationCompressor.decompress(local, scheme)[
                "weight"
            ].float()
    (out_dir / "reference").mkdir(exist_ok=True)
    save_file(reference, str(out_dir / "reference" / "dequantized.safetensors"))


def main():
    data_dir = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "tests/data")
    print(
        f"compressed-tensors {compressed_tensors.__version__}, torch {torch.__version__}, "
        f"safetensors {safetensors.__version__}, numpy {numpy.__version__}"
    )
    make_fixture(data_dir / "ct-library-int4-g32-sym", torch.bfloat16, symmetric=True, seed=1)
    make_fixture(data_dir / "ct-library-int4-g32-asym", torch.float16, symmetric=False, seed=2)


if __name__ == "__main__":
    main()
