#!/usr/bin/env python3
"""Writes the gpt-oss MXFP4 fixture whose reference decoding comes from the format's own code.

Run by hand (never in CI; the build machines carry no PyTorch), in a throwaway virtualenv. gpt-oss
declares Python >= 3.12 for its serving extras, but the module used here (gpt_oss/torch/weights.py)
needs only torch and safetensors, so it is installed without its dependencies:

    python3 -m venv /tmp/gptossvenv
    /tmp/gptossvenv/bin/pip install torch==2.15.0 safetensors==0.8.0 numpy==2.4.6 \\
        transformers==5.24.0
    /tmp/gptossvenv/bin/pip install --no-deps --ignore-requires-python gpt-oss==0.0.9
    /tmp/gptossvenv/bin/python tests/data/make_gpt_oss_fixture.py tests/data

The fixture is one gpt-oss MoE layer (E = 3, H = 96, I = 32, bf16 biases, a float router). Neither
library quantizes on a CPU (transformers' quantize_to_mxfp4 runs triton_kernels' downcast, fetched
from the Hugging Face hub), so the script draws the stored bytes itself: uniform random e2m1 codes
(every nibble value in both nibble positions of both tensors, checked) and e8m0 scales from 2^-8
to 2^1, plus one block at 0x00 (2^-127: subnormal float32 products). The scales stay that small
because every fixture also runs a forward in f16 and bf16 (tests/format/upstream_regressions_test.cpp).
config.json is transformers' own GptOssConfig with its Mxfp4Config, written by save_pretrained.

reference/dequantized.safetensors holds the libraries' decoding of exactly the saved file, in
float32, the stored layout (gate_up rows interleaved: row 2i is gate channel i, row 2i + 1 up
channel i, as gpt-oss's swiglu and transformers' GptOssExperts split them):
  - `<prefix>.gate_up_proj` [E, 2I, H] and `<prefix>.down_proj` [E, H, I]: gpt-oss's reference
    loader (gpt_oss.torch.weights.Checkpoint._get_mxfp4_tensor: a lookup table of the 16 e2m1
    values, then ldexp by scale - 127), asked for float32. Every e2m1 value times 2^k is exact in
    float32 over this range, so qmoe must match it bit for bit. The script checks that
    transformers' convert_moe_packed_tensors (integrations/mxfp4.py, what from_pretrained runs to
    dequantize on a machine without the MXFP4 kernels) decodes the same file to the same values
    (it returns them transposed, [E, K, N]).
  - `<prefix>.gate_up_proj_bias` [E, 2I] and `<prefix>.down_proj_bias` [E, H]: the stored bf16
    biases as gpt-oss's Checkpoint.get returns them, widened to float32 (exact).
It sits in a subfolder so that the checkpoint reader, which takes every *.safetensors in the model
folder, does not see it.

With a qmoe-written checkpoint as a second argument (`qmoe sample DIR --format mxfp4`), the script
instead decodes that checkpoint's experts with both libraries and checks that they agree.
"""
import json
import pathlib
import sys

import gpt_oss
import numpy
import safetensors
import safetensors.torch
import torch
import transformers
from gpt_oss.torch.weights import Checkpoint
from transformers import GptOssConfig, Mxfp4Config
from transformers.integrations.mxfp4 import convert_moe_packed_tensors

VERSIONS = {
    "torch": "2.15.0",
    "transformers": "5.24.0",
    "safetensors": "0.8.0",
    "numpy": "2.4.6",
}
E, H, I, TOP_K = 3, 96, 32, 2
PREFIX = "model.layers.0.mlp.experts"
NAME = "gpt-oss-library-mxfp4-bias"


def check_versions():
    found = {
        "torch": torch.__version__.split("+")[0],
        "transformers": transformers.__version__,
        "safetensors": safetensors.__version__,
        "numpy": numpy.__version__,
    }
    if found != VERSIONS:
        sys.exit(f"pinned {VERSIONS}, found {found}")
    print(f"gpt-oss 0.0.9 (gpt_oss.torch.weights from {gpt_oss.__path__[0]}), {found}")


def random_weight(gen, n, k):
    """Random stored blocks [E, n, k/32, 16] and scales [E, n, k/32] in gpt-oss's layout."""
    blocks = torch.randint(0, 256, (E, n, k // 32, 16), generator=gen, dtype=torch.uint8)
    scales = torch.randint(127 - 8, 127 + 2, (E, n, k // 32), generator=gen, dtype=torch.uint8)
    for nibbles in (blocks & 0x0F, blocks >> 4):
        assert set(nibbles.unique().tolist()) == set(range(16)), "a nibble value is missing"
    return blocks, scales


def tensors(seed):
    gen = torch.Generator().manual_seed(seed)
    gate_up_blocks, gate_up_scales = random_weight(gen, 2 * I, H)
    down_blocks, down_scales = random_weight(gen, H, I)
    gate_up_scales[1, 5, 2] = 0x00

    def bf16(*shape):
        return (torch.randn(*shape, generator=gen) * 0.5).to(torch.bfloat16)

    return {
        f"{PREFIX}.gate_up_proj_blocks": gate_up_blocks,
        f"{PREFIX}.gate_up_proj_scales": gate_up_scales,
        f"{PREFIX}.gate_up_proj_bias": bf16(E, 2 * I),
        f"{PREFIX}.down_proj_blocks": down_blocks,
        f"{PREFIX}.down_proj_scales": down_scales,
        f"{PREFIX}.down_proj_bias": bf16(E, H),
        "model.layers.0.mlp.router.weight": bf16(E, H),
        "model.layers.0.mlp.router.bias": bf16(E),
    }


def decode(model_dir, prefix):
    """Both libraries' float32 decoding of the experts under `prefix`; they must agree exactly."""
    checkpoint = Checkpoint(str(model_dir), torch.device("cpu"))
    decoded = {}
    for proj in ("gate_up_proj", "down_proj"):
        blocks, scales = f"{prefix}.{proj}_blocks", f"{prefix}.{proj}_scales"
        w = checkpoint._get_mxfp4_tensor(blocks, scales, dtype=torch.float32)
        hf = convert_moe_packed_tensors(
            checkpoint._get_tensor(blocks), checkpoint._get_tensor(scales), dtype=torch.float32
        )
        assert torch.equal(hf.transpose(1, 2), w), f"{proj}: gpt-oss and transformers disagree"
        assert torch.isfinite(w).all(), f"{proj}: a decoded weight is not finite"
        decoded[f"{prefix}.{proj}"] = w.contiguous()
        if f"{prefix}.{proj}_bias" in checkpoint.tensor_name_to_file:
            decoded[f"{prefix}.{proj}_bias"] = checkpoint.get(f"{prefix}.{proj}_bias").float()
    return decoded


def write_config(out_dir):
    config = GptOssConfig(
        num_hidden_layers=1,
        num_local_experts=E,
        num_experts_per_tok=TOP_K,
        hidden_size=H,
        intermediate_size=I,
    )
    config.quantization_config = Mxfp4Config(
        modules_to_not_convert=[
            "model.layers.*.self_attn",
            "model.layers.*.mlp.router",
            "model.embed_tokens",
            "lm_head",
        ]
    ).to_dict()
    config.save_pretrained(str(out_dir))
    json.loads((out_dir / "config.json").read_text())  # written and readable


def make_fixture(out_dir):
    out_dir.mkdir(parents=True, exist_ok=True)
    safetensors.torch.save_file(
        tensors(seed=7), str(out_dir / "model.safetensors"), metadata={"format": "pt"}
    )
    write_config(out_dir)
    reference = decode(out_dir, PREFIX)
    (out_dir / "reference").mkdir(exist_ok=True)
    safetensors.torch.save_file(reference, str(out_dir / "reference" / "dequantized.safetensors"))


def check_qmoe_sample(sample_dir):
    """Decodes every layer of a `qmoe sample --format mxfp4` checkpoint with both libraries."""
    names = Checkpoint(str(sample_dir), torch.device("cpu")).tensor_name_to_file
    prefixes = sorted({n.rsplit(".", 1)[0] for n in names if n.endswith("gate_up_proj_blocks")})
    assert prefixes, f"{sample_dir}: no gate_up_proj_blocks"
    for prefix in prefixes:
        decoded = decode(sample_dir, prefix)
        shapes = {k: list(v.shape) for k, v in decoded.items()}
        print(f"{prefix}: gpt-oss and transformers agree: {shapes}")


def main():
    check_versions()
    data_dir = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "tests/data")
    if len(sys.argv) > 2:
        check_qmoe_sample(pathlib.Path(sys.argv[2]))
        return
    make_fixture(data_dir / NAME)


if __name__ == "__main__":
    main()
