#!/usr/bin/env python3
"""Writes the AWQ and GPTQ fixtures whose packed tensors come from the formats' own libraries.

Run by hand (never in CI; the build machines carry no PyTorch), in two throwaway virtualenvs:
AutoAWQ and AutoGPTQ were last tested with transformers 4.x, GPTQModel needs 5.x.

    python3 -m venv /tmp/fixvenv
    /tmp/fixvenv/bin/pip install torch==2.15.0 safetensors==0.8.0 numpy==2.4.6 \
        transformers==4.51.3 accelerate==1.16.0
    /tmp/fixvenv/bin/pip install --no-deps autoawq==0.2.9 auto-gptq==0.7.1
    /tmp/fixvenv/bin/python tests/data/make_awq_gptq_fixtures.py tests/data

    python3 -m venv /tmp/gptqmodelvenv
    /tmp/gptqmodelvenv/bin/pip install torch==2.15.0 safetensors==0.8.0 numpy==2.4.6 \
        transformers==5.24.0 gptqmodel==7.7.0
    /tmp/gptqmodelvenv/bin/python tests/data/make_awq_gptq_fixtures.py tests/data

Each run makes the fixtures whose library is installed and skips the others. The versions are
pinned in COMMON_VERSIONS / LIBRARY_VERSIONS below; the script refuses to run with others.

The packers and the dequantization are the libraries' own:
  - AWQ: AutoAWQ's WQLinear_GEMM.from_linear (awq/modules/linear/gemm.py) packs, and
    dequantize_gemm (awq/utils/packing_utils.py), which WQLinear_GEMM's forward runs when it has
    no CUDA kernel, decodes.
  - GPTQ v1: AutoGPTQ's QuantLinear.pack of qlinear_cuda.py (the packer that honours g_idx)
    packs, and the same QuantLinear's forward, whose CPU path decodes through g_idx, decodes.
  - GPTQ v2: GPTQModel's TorchLinear.pack_block packs (its zero points are stored as they are,
    which is the gptq_v2 checkpoint format), and TorchLinear.dequantize_weight decodes. Its
    native CPU packing extension (JIT-compiled on first use, ~100 s) and its Python fallback
    (GPTQMODEL_DISABLE_PACK_EXT=1) write byte-identical files.
AutoAWQ's and AutoGPTQ's package __init__ files import their whole model zoo and calibration
stack (datasets, CUDA kernels); only their packing modules are imported here
(import_module_only), and --no-deps keeps their CUDA-only requirements out. GPTQModel installs
with its dependencies on a CPU-only machine and is imported normally.

The data is not quantized from float weights: for every projection the script draws integer
codes, zero points and 16-bit scales, hands the packer the float weight (q - z) * s (exact in
float32) and checks that the library decodes the saved file back to exactly those values. So the
codes cover the whole range, every zero point occurs, and nothing depends on a quantizer's
rounding. AutoGPTQ's zero points are drawn from 1..2^bits-1: it stores z - 1 unmasked, so a zero
point of 0 spills into the fields above it in its qzeros word, whose zero points are then lost.

One fixture (ZERO_OVERFLOW_WORDS) puts zero points of 0 in chosen words of AutoGPTQ's qzeros on
purpose. No decoding can give back the packer's input there, and AutoGPTQ's kernels disagree on the
overflowed fields: the script checks qlinear_cuda's and qlinear_cuda_old's decodings against what
each one's bit arithmetic gives, and the reference holds, instead of `<module>.weight` and the
forward, qlinear_cuda_old's decoding, the true zero points and which of them the overflow lost.

Each fixture is one Qwen-MoE layer (model.layers.0.mlp.experts.j.{gate,up,down}_proj) with
config.json as the library's model would carry it. reference/expected.safetensors (in a
subfolder, so that the checkpoint reader does not take it as part of the model) holds:
  - `<module>.weight` [N, K] f32: the library's decoding of the saved tensors (exact in f32:
    a code difference times a 16-bit scale);
  - `hidden` [M, H] f32, `router_logits` [M, E] f32: random inputs;
  - `output` [M, H] f32: the layer's forward in float64 over those inputs, the projections run by
    the library's own decoding (softmax routing, top-k, renormalized as norm_topk_prob says,
    SiLU(gate) * up, down, bias where present, weighted sum), rounded once to f32 at the end.
"""
import importlib
import importlib.metadata
import importlib.util
import json
import pathlib
import sys

import numpy
import torch
from safetensors.torch import load_file, save_file

# The versions each packer was run with, with what it imports; the script refuses others.
COMMON_VERSIONS = {"torch": "2.15.0", "safetensors": "0.8.0", "numpy": "2.4.6"}
LIBRARY_VERSIONS = {
    "autoawq": {"autoawq": "0.2.9", "transformers": "4.51.3", "accelerate": "1.16.0"},
    "auto-gptq": {"auto-gptq": "0.7.1", "transformers": "4.51.3"},
    "gptqmodel": {"gptqmodel": "7.7.0", "transformers": "5.24.0"},
}
TOKENS = 9
TOP_K = 2
PROJECTIONS = ("gate_proj", "up_proj", "down_proj")


def import_module_only(dotted):
    """Imports `dotted` without running its parent packages' __init__ files."""
    parts = dotted.split(".")
    for i in range(1, len(parts)):
        name = ".".join(parts[:i])
        if name in sys.modules:
            continue
        if i == 1:
            location = pathlib.Path(importlib.util.find_spec(name).origin).parent
        else:
            location = pathlib.Path(sys.modules[".".join(parts[: i - 1])].__path__[0]) / parts[i - 1]
        spec = importlib.util.spec_from_file_location(
            name, location / "__init__.py", submodule_search_locations=[str(location)]
        )
        sys.modules[name] = importlib.util.module_from_spec(spec)
    return importlib.import_module(dotted)


def installed(package):
    try:
        return importlib.metadata.version(package).split("+")[0]
    except importlib.metadata.PackageNotFoundError:
        return None


def check_versions(library):
    pins = {**COMMON_VERSIONS, **LIBRARY_VERSIONS[library]}
    found = {name: installed(name) for name in pins}
    wrong = {k: v for k, v in found.items() if v != pins[k]}
    if wrong:
        sys.exit(f"{library}: pinned {pins}, found {wrong}: update the pins and the README")
    print(", ".join(f"{k} {v}" for k, v in found.items()))


class Fixture:
    def __init__(self, name, library, bits, group_size, asym, act_order, bias, E, H, I, seed):
        self.name, self.library, self.bits = name, library, bits
        self.group_size, self.asym, self.act_order, self.bias = group_size, asym, act_order, bias
        self.E, self.H, self.I, self.seed = E, H, I, seed

    def shape(self, projection):  # (N, K)
        return (self.H, self.I) if projection == "down_proj" else (self.I, self.H)

    def groups(self, K):
        return 1 if self.group_size == -1 else K // self.group_size

    def quantization_config(self):
        if self.library == "autoawq":
            awq_config = import_module_only("awq.models._config")
            return awq_config.AwqConfig(
                zero_point=self.asym, q_group_size=self.group_size, w_bit=self.bits, version="gemm"
            ).to_transformers_dict()
        if self.library == "gptqmodel":
            return gptqmodel_config(self)
        # The keys of auto_gptq.modeling._base.BaseQuantizeConfig.to_dict() in 0.7.1 (that module
        # imports the whole model zoo); it writes no checkpoint_format, which means v1 ("gptq").
        return {
            "bits": self.bits,
            "group_size": self.group_size,
            "damp_percent": 0.01,
            "desc_act": self.act_order,
            "static_groups": False,
            "sym": not self.asym,
            "true_sequential": True,
            "model_name_or_path": None,
            "model_file_base_name": "model",
            "is_marlin_format": False,
            "quant_method": "gptq",
        }

    def model_config(self):
        return {
            "model_type": "qwen2_moe",
            "hidden_size": self.H,
            "intermediate_size": self.I,
            "moe_intermediate_size": self.I,
            "num_experts": self.E,
            "num_experts_per_tok": TOP_K,
            "num_hidden_layers": 1,
            "hidden_act": "silu",
            "norm_topk_prob": True,
            "quantization_config": self.quantization_config(),
        }


# AutoAWQ and AutoGPTQ size their outputs as `count // 32 * bits` words and GPTQModel's pack_block
# asks for it, so K and N are multiples of 32; the odd shapes are the expert counts, the group
# counts (2 to 6) and I > H.
FIXTURES = [
    Fixture("awq-library-int4-g16-bias", "autoawq", 4, 16, asym=True, act_order=False, bias=True,
            E=3, H=96, I=64, seed=11),
    Fixture("gptq-library-int4-g16-asym-desc_act", "auto-gptq", 4, 16, asym=True, act_order=True,
            bias=False, E=3, H=64, I=96, seed=12),
    Fixture("gptq-library-int8-channel-sym-bias", "auto-gptq", 8, -1, asym=False, act_order=False,
            bias=True, E=4, H=96, I=32, seed=13),
    Fixture("gptq-library-int8-g32-asym-desc_act-v2", "gptqmodel", 8, 32, asym=True,
            act_order=True, bias=False, E=3, H=96, I=64, seed=14),
    Fixture("gptq-library-int4-g32-asym-zero-overflow", "auto-gptq", 4, 32, asym=True,
            act_order=False, bias=False, E=3, H=64, I=32, seed=15),
]

# AutoGPTQ's QuantLinear.pack computes z - 1 as an int, casts it to uint32 and ORs it in shifted
# without masking: z = 0 becomes 0xffffffff << (bits * field), all ones in its own field and in
# every field above it in the word. These zero points of 0 go into the lowest field of a word,
# middle ones, the top one (nothing above it, nothing lost) and two into one word; the last entry is
# a word seen in a real checkpoint: true zeros [0, 13, 4, 10, 3, 4, 7, 15] packed as 0xffffffff.
# (expert, projection, group, first output channel, the zero points from that channel on)
ZERO_OVERFLOW_FIXTURE = "gptq-library-int4-g32-asym-zero-overflow"
ZERO_OVERFLOW_WORDS = [
    (0, "gate_proj", 0, 0, [0]),  # field 0 of word 0: fields 1..7 lost
    (0, "gate_proj", 1, 11, [0]),  # field 3 of word 1: fields 4..7 lost
    (1, "down_proj", 0, 37, [0]),  # field 5 of word 4: fields 6, 7 lost
    (1, "down_proj", 0, 47, [0]),  # field 7 of word 5: nothing lost
    (2, "up_proj", 0, 16, [0, 5, 0]),  # fields 0 and 2 of word 2: fields 1..7 lost
    (2, "up_proj", 1, 0, [0, 13, 4, 10, 3, 4, 7, 15]),  # the word seen in a real checkpoint
]


class Draw:
    """The integer codes, zero points, scales, g_idx and bias one projection is made of."""

    def __init__(self, f, N, K, rng, g_idx=None, zero_points_of_0=()):
        G, top = f.groups(K), 2**f.bits - 1
        self.codes = rng.integers(0, top + 1, size=(N, K))
        if not f.asym:
            self.zeros = numpy.full((N, G), 2 ** (f.bits - 1))
        else:  # AutoGPTQ's v1 cannot store 0 (see the module docstring); the others take any
            self.zeros = rng.integers(1 if f.library == "auto-gptq" else 0, top + 1, size=(N, G))
        for g, n0, zeros in zero_points_of_0:  # ZERO_OVERFLOW_WORDS
            self.zeros[n0 : n0 + len(zeros), g] = zeros
        # Scales as 16-bit floats so that the stored f16 holds them exactly.
        self.scales = (rng.uniform(0.002, 0.02, size=(N, G)) * (8 / 2**f.bits)).astype(numpy.float16)
        if g_idx is not None:
            self.g_idx = g_idx
        elif f.act_order:  # GPTQ's desc_act: channel perm[i] is the i-th quantized, in group i // gs
            self.g_idx = numpy.empty(K, dtype=numpy.int32)
            self.g_idx[rng.permutation(K)] = numpy.arange(K) // f.group_size
        else:
            self.g_idx = numpy.arange(K, dtype=numpy.int32) // (K if f.group_size == -1 else f.group_size)
        self.bias = rng.normal(0, 0.1, size=N).astype(numpy.float16) if f.bias else None

    def weight(self, zeros=None):  # [N, K] float32, exact: (q - z) * s, a small integer, an f16
        s = self.scales.astype(numpy.float32)[:, self.g_idx]
        z = (self.zeros if zeros is None else zeros)[:, self.g_idx]
        return ((self.codes - z) * s).astype(numpy.float32)

    def linear(self):
        N, K = self.codes.shape
        linear = torch.nn.Linear(K, N, bias=self.bias is not None, dtype=torch.float32)
        with torch.no_grad():
            linear.weight.copy_(torch.from_numpy(self.weight()))
            if self.bias is not None:
                linear.bias.copy_(torch.from_numpy(self.bias.astype(numpy.float32)))
        return linear


def pack_awq(f, d):
    gemm = import_module_only("awq.modules.linear.gemm")
    scales = torch.from_numpy(d.scales.astype(numpy.float32)).t().contiguous()  # [G, N]
    zeros = torch.from_numpy(d.zeros).t().contiguous().to(torch.int32)
    q = gemm.WQLinear_GEMM.from_linear(d.linear(), f.bits, f.group_size, scales=scales, zeros=zeros)
    tensors = {"qweight": q.qweight, "qzeros": q.qzeros, "scales": q.scales}
    if q.bias is not None:
        tensors["bias"] = q.bias
    return tensors


def pack_gptq(f, d):
    qlinear = import_module_only("auto_gptq.nn_modules.qlinear.qlinear_cuda")
    N, K = d.codes.shape
    q = qlinear.QuantLinear(f.bits, f.group_size, K, N, bias=d.bias is not None)
    scales = torch.from_numpy(d.scales.astype(numpy.float32))  # [N, G], as GPTQ.fasterquant returns
    zeros = torch.from_numpy(d.zeros).to(torch.int32)
    q.pack(d.linear(), scales, zeros, torch.from_numpy(d.g_idx))
    # pack keeps the float32 Linear's dtype; a real GPTQ model is float16 throughout, and these
    # values came from float16, so the cast is exact.
    tensors = {"qweight": q.qweight, "qzeros": q.qzeros, "scales": q.scales.half(), "g_idx": q.g_idx}
    if q.bias is not None:
        tensors["bias"] = q.bias.half()
    return tensors


def pack_gptqmodel(f, d):
    torch_linear = importlib.import_module("gptqmodel.nn_modules.qlinear.torch")
    N, K = d.codes.shape
    q = torch_linear.TorchLinear(
        bits=f.bits, group_size=f.group_size, sym=not f.asym, desc_act=f.act_order,
        in_features=K, out_features=N, bias=d.bias is not None,
    )
    scales = torch.from_numpy(d.scales.astype(numpy.float32))  # [N, G]
    q.pack_block(d.linear(), scales, torch.from_numpy(d.zeros).to(torch.int32),
                 torch.from_numpy(d.g_idx))
    # pack_block leaves the zero points as they are (the v2 convention, what the gptq_v2 format
    # saves) and the scales and bias in float16.
    tensors = {"qweight": q.qweight, "qzeros": q.qzeros, "scales": q.scales, "g_idx": q.g_idx}
    if q.bias is not None:
        tensors["bias"] = q.bias
    return tensors


def gptqmodel_config(f):
    """QuantizeConfig.to_dict() for the gptq_v2 format, less `meta` (a temporary path and the
    machine's offload and VRAM settings, which would change on every run)."""
    quantization = importlib.import_module("gptqmodel.quantization")
    config = quantization.QuantizeConfig(
        bits=f.bits, group_size=f.group_size, desc_act=f.act_order, sym=not f.asym,
        format=quantization.FORMAT.GPTQ_V2,
    ).to_dict()
    config.pop("meta", None)
    return json.loads(json.dumps(config))  # its enums are str subclasses: keep their values


def awq_projection(f, saved):
    """The AWQ projection as the library decodes it: (weight [K, N] f64, bias [N] f64 or None)."""
    packing = import_module_only("awq.utils.packing_utils")
    w = packing.dequantize_gemm(
        saved["qweight"], saved["qzeros"], saved["scales"].double(), f.bits, f.group_size
    )
    return w, saved["bias"].double() if "bias" in saved else None


def gptq_projection(f, saved):
    """The GPTQ projection through QuantLinear.forward's CPU path, in float64."""
    qlinear = import_module_only("auto_gptq.nn_modules.qlinear.qlinear_cuda")
    K, N = saved["g_idx"].shape[0], saved["scales"].shape[1]
    q = qlinear.QuantLinear(f.bits, f.group_size, K, N, bias=False, weight_dtype=torch.float64)
    q.qweight, q.qzeros, q.g_idx = saved["qweight"], saved["qzeros"], saved["g_idx"]
    q.scales = saved["scales"].double()
    with torch.no_grad():
        w = q(torch.eye(K, dtype=torch.float64))  # row k: the decoded input channel k
    return w, saved["bias"].double() if "bias" in saved else None


def gptq_old_projection(f, saved):
    """The GPTQ projection through qlinear_cuda_old's QuantLinear.forward CPU path, in float64
    (it ignores g_idx: group k // group_size)."""
    qlinear = import_module_only("auto_gptq.nn_modules.qlinear.qlinear_cuda_old")
    K, N = saved["g_idx"].shape[0], saved["scales"].shape[1]
    q = qlinear.QuantLinear(f.bits, f.group_size, K, N, bias=False, weight_dtype=torch.float64)
    q.qweight, q.qzeros = saved["qweight"], saved["qzeros"]
    q.scales = saved["scales"].double()
    with torch.no_grad():
        return q(torch.eye(K, dtype=torch.float64))


def overflowed_zeros(zeros, bits):
    """What AutoGPTQ's unmasked z - 1 leaves of true zero points [N, G]: (state, cuda, cuda_old).
    In each word of 32 / bits output channels the fields from the first zero point of 0 up are all
    ones. state [N, G] u8: 0 intact, 1 the zero point of 0 that set them, 2 overwritten (lost).
    qlinear_cuda's CPU path masks, then adds 1: all ones read as 2^bits; qlinear_cuda_old's adds 1,
    then masks: 0."""
    pf = 32 // bits
    state = numpy.zeros(zeros.shape, dtype=numpy.uint8)
    for n0 in range(0, zeros.shape[0], pf):
        for g in range(zeros.shape[1]):
            first = numpy.flatnonzero(zeros[n0 : n0 + pf, g] == 0)
            if first.size:
                state[n0 + first[0], g] = 1
                state[n0 + first[0] + 1 : n0 + pf, g] = 2
    all_ones = state > 0
    return state, numpy.where(all_ones, 2**bits, zeros), numpy.where(all_ones, 0, zeros)


def overflow_reference(f, d, saved, module):
    """The ZERO_OVERFLOW_WORDS fixture's reference tensors of one projection, after checking both
    of AutoGPTQ's decodings: `<module>.weight_cuda_old` [N, K] f32, `<module>.zeros` [N, G] u8 (the
    true zero points, the packer's input) and `<module>.zero_state` [N, G] u8."""
    state, cuda_zeros, old_zeros = overflowed_zeros(d.zeros, f.bits)
    cuda = gptq_projection(f, saved)[0].t().float()
    assert torch.equal(cuda, torch.from_numpy(d.weight(cuda_zeros))), f"{module}: qlinear_cuda"
    old = gptq_old_projection(f, saved).t().float().contiguous()
    assert torch.equal(old, torch.from_numpy(d.weight(old_zeros))), f"{module}: qlinear_cuda_old"
    return {
        module + ".weight_cuda_old": old,
        module + ".zeros": torch.from_numpy(d.zeros.astype(numpy.uint8)),
        module + ".zero_state": torch.from_numpy(state),
    }


def gptqmodel_projection(f, saved):
    """The GPTQ projection through TorchLinear.dequantize_weight (what its forward multiplies)."""
    torch_linear = importlib.import_module("gptqmodel.nn_modules.qlinear.torch")
    K, N = saved["g_idx"].shape[0], saved["scales"].shape[1]
    q = torch_linear.TorchLinear(
        bits=f.bits, group_size=f.group_size, sym=not f.asym, desc_act=f.act_order,
        in_features=K, out_features=N, bias=False,
    )
    q.qweight, q.qzeros, q.g_idx = saved["qweight"], saved["qzeros"], saved["g_idx"]
    q.scales = saved["scales"].double()
    q.post_init()
    return q.dequantize_weight(), saved["bias"].double() if "bias" in saved else None


PACKERS = {
    "autoawq": (pack_awq, awq_projection),
    "auto-gptq": (pack_gptq, gptq_projection),
    "gptqmodel": (pack_gptqmodel, gptqmodel_projection),
}


def layer_forward(f, projections, hidden, logits):
    """The Qwen-MoE layer in float64: projections[(j, name)] = (weight [K, N], bias)."""
    def run(j, name, x):
        w, b = projections[(j, name)]
        return x @ w + (b if b is not None else 0)

    probs = torch.softmax(logits, dim=-1)
    top = torch.topk(probs, TOP_K + 1, dim=-1)
    margin = (top.values[:, TOP_K - 1] - top.values[:, TOP_K]).min().item()
    assert margin > 1e-3, f"routing too close to a tie ({margin}); change the seed"
    weights, ids = top.values[:, :TOP_K], top.indices[:, :TOP_K]
    weights = weights / weights.sum(dim=-1, keepdim=True)
    out = torch.zeros_like(hidden)
    for m in range(hidden.shape[0]):
        x = hidden[m : m + 1]
        for slot in range(TOP_K):
            j = int(ids[m, slot])
            h = torch.nn.functional.silu(run(j, "gate_proj", x)) * run(j, "up_proj", x)
            out[m] += weights[m, slot] * run(j, "down_proj", h)[0]
    return out


def make_fixture(data_dir, f):
    rng = numpy.random.default_rng(f.seed)
    pack, decode = PACKERS[f.library]
    overflow = f.name == ZERO_OVERFLOW_FIXTURE
    state, draws = {}, {}
    for j in range(f.E):
        for name in PROJECTIONS:
            module = f"model.layers.0.mlp.experts.{j}.{name}"
            # gate and up read the same input, so GPTQ's desc_act (the order of the Hessian's
            # diagonal, from that input) gives them the same g_idx; down has its own.
            shared = draws[(j, "gate_proj")].g_idx if name == "up_proj" else None
            zeros = [w[2:] for w in ZERO_OVERFLOW_WORDS if overflow and w[:2] == (j, name)]
            draws[(j, name)] = Draw(f, *f.shape(name), rng, shared, zeros)
            for suffix, t in pack(f, draws[(j, name)]).items():
                state[f"{module}.{suffix}"] = t.clone()  # own memory: gate and up share g_idx

    out_dir = data_dir / f.name
    (out_dir / "reference").mkdir(parents=True, exist_ok=True)
    save_file(state, str(out_dir / "model.safetensors"), metadata={"format": "pt"})
    (out_dir / "config.json").write_text(json.dumps(f.model_config(), indent=2) + "\n")

    saved = load_file(str(out_dir / "model.safetensors"))
    reference, projections = {}, {}
    for (j, name), d in draws.items():
        module = f"model.layers.0.mlp.experts.{j}.{name}"
        local = {k[len(module) + 1 :]: v for k, v in saved.items() if k.startswith(module + ".")}
        if overflow:
            reference.update(overflow_reference(f, d, local, module))
            continue
        w, b = decode(f, local)
        # The library must give back exactly the weight the packer was handed.
        assert torch.equal(w.t().float(), torch.from_numpy(d.weight())), f"{module}: decode differs"
        projections[(j, name)] = (w, b)
        reference[module + ".weight"] = w.t().float().contiguous()

    if overflow:  # decoding only, no forward; the word from a real checkpoint packs as it did there
        assert saved["model.layers.0.mlp.experts.2.up_proj.qzeros"][1, 0].item() == -1
    else:
        hidden = torch.from_numpy(rng.standard_normal((TOKENS, f.H)).astype(numpy.float32))
        logits = torch.from_numpy(rng.standard_normal((TOKENS, f.E)).astype(numpy.float32))
        out = layer_forward(f, projections, hidden.double(), logits.double())
        reference.update(hidden=hidden, router_logits=logits, output=out.float())
    save_file(reference, str(out_dir / "reference" / "expected.safetensors"))
    print(f"{f.name}: {sum(p.stat().st_size for p in out_dir.rglob('*') if p.is_file())} bytes")


def main():
    data_dir = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "tests/data")
    libraries = [lib for lib in LIBRARY_VERSIONS if installed(lib)]
    if not libraries:
        sys.exit(f"none of {list(LIBRARY_VERSIONS)} is installed; see tests/data/README.md")
    for library in libraries:
        check_versions(library)
    for f in FIXTURES:
        if f.library in libraries:
            make_fixture(data_dir, f)
        else:
            print(f"{f.name}: skipped, {f.library} is not installed here")


if __name__ == "__main__":
    main()
