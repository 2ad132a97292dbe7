#!/usr/bin/env python3
"""Writes the AMD Quark OCP-MX fixtures: a tiny Qwen3-MoE quantized and exported by Quark itself.

Run by hand (never in CI; the build machines carry no PyTorch), in a throwaway virtualenv:

    python3 -m venv /tmp/quarkvenv
    /tmp/quarkvenv/bin/pip install torch==2.15.0 amd-quark==0.13 safetensors==0.8.0 \
        numpy==2.4.6 transformers==4.51.3 accelerate==1.16.0 datasets==3.6.0
    /tmp/quarkvenv/bin/python tests/data/make_quark_fixture.py tests/data

(datasets is pinned below 4 only because Quark imports it and datasets 4 wants a huggingface-hub
newer than transformers 4.51 accepts.) The script refuses other versions of Quark and torch.

Each fixture is one Qwen3-MoE decoder layer (E = 3, H = 96, I = 64, one attention head of 16)
with random float32 weights. Quark does every step: ModelQuantizer.quantize_model / freeze with
OCP_MXFP4Spec weights (e2m1, e8m0 scale per 32 along K), export_safetensors writes config.json
(quant_method "quark") and the packed tensors. Attention, the router (`mlp.gate`) and lm_head are
excluded, so they stay float and appear in the config's `exclude` list.

  quark-library-mxfp4       weights only (W4A16)
  quark-library-mxfp4-w4a4  plus dynamic OCP_MXFP4Spec input_tensors (W4A4) with Quark's default
                            scale rule, "even"

reference/dequantized.safetensors holds, per expert projection, the library's own values of the
frozen model: each expert's get_quant_weight (the weight its forward multiplies by, e2m1 values
times their e8m0 scales), the values export_safetensors then packs. Stored as bfloat16, where
e2m1 x 2^k is exact, to keep the fixture small. (Decoding the exported file back through Quark
0.13's import_model_from_safetensors fails on CPU for these per-expert MX layers: it reports the
weight_scale tensors as missing.) It sits in a subfolder so that the checkpoint reader, which
takes every *.safetensors in the model folder, does not see it.
"""
import pathlib
import shutil
import sys

import numpy
import safetensors
import torch
from safetensors.torch import save_file

import quark
from quark.torch import ModelQuantizer, export_safetensors
from quark.torch.quantization.config.config import OCP_MXFP4Spec, QConfig, QLayerConfig
from transformers import Qwen3MoeConfig, Qwen3MoeForCausalLM

PINNED = {"quark": "0.13", "torch": "2.15.0"}
E, H, I, TOP_K = 3, 96, 64, 2
PROJECTIONS = ("gate_proj", "up_proj", "down_proj")


def check_versions():
    found = {"quark": quark.__version__, "torch": torch.__version__.split("+")[0]}
    for name, want in PINNED.items():
        if not found[name].startswith(want):
            sys.exit(f"{name} {found[name]} found, this script pins {want}")


def tiny_model(seed):
    torch.manual_seed(seed)
    config = Qwen3MoeConfig(
        vocab_size=16,
        hidden_size=H,
        intermediate_size=H,
        moe_intermediate_size=I,
        num_hidden_layers=1,
        num_attention_heads=1,
        num_key_value_heads=1,
        head_dim=16,
        num_experts=E,
        num_experts_per_tok=TOP_K,
        decoder_sparse_step=1,
        norm_topk_prob=True,
        tie_word_embeddings=True,
    )
    return Qwen3MoeForCausalLM(config).eval()


def make_fixture(out_dir, seed, w4a4):
    model = tiny_model(seed)
    weight = OCP_MXFP4Spec(ch_axis=-1, is_dynamic=False).to_quantization_spec()
    inputs = None
    if w4a4:
        inputs = OCP_MXFP4Spec(ch_axis=-1, is_dynamic=True).to_quantization_spec()
        assert inputs.scale_calculation_mode == "even", inputs.scale_calculation_mode
    config = QConfig(
        global_quant_config=QLayerConfig(weight=weight, input_tensors=inputs),
        exclude=["lm_head", "*self_attn*", "*.mlp.gate"],
    )
    quantizer = ModelQuantizer(config)
    model = quantizer.freeze(quantizer.quantize_model(model, None))
    reference = {}
    for j in range(E):
        for name in PROJECTIONS:
            module_name = f"model.layers.0.mlp.experts.{j}.{name}"
            module = model.get_submodule(module_name)
            with torch.no_grad():
                reference[module_name + ".weight"] = module.get_quant_weight(module.weight).to(torch.bfloat16)
    if out_dir.exists():
        shutil.rmtree(out_dir)
    export_safetensors(model, str(out_dir))
    (out_dir / "generation_config.json").unlink(missing_ok=True)
    (out_dir / "reference").mkdir()
    save_file(reference, str(out_dir / "reference" / "dequantized.safetensors"))


def main():
    check_versions()
    data_dir = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "tests/data")
    print(
        f"amd-quark {quark.__version__}, torch {torch.__version__}, "
        f"safetensors {safetensors.__version__}, numpy {numpy.__version__}"
    )
    make_fixture(data_dir / "quark-library-mxfp4", seed=1, w4a4=False)
    make_fixture(data_dir / "quark-library-mxfp4-w4a4", seed=2, w4a4=True)


if __name__ == "__main__":
    main()
