#!/usr/bin/env python3
"""Writes quark-mxfp4-even-blocks.txt: float32 blocks of 32 and what amd-quark makes of them as
W4A4 input tensors with its default scale rule, "even".

Run by hand (never in CI), in the virtualenv of make_quark_fixture.py (same pins):

    /tmp/quarkvenv/bin/python tests/data/make_quark_mx_table.py tests/data

The quantizer is the one Quark puts on a layer's input for OCP_MXFP4Spec(ch_axis=-1,
is_dynamic=True): FakeQuantizeBase.get_fake_quantize builds a DynamicScaledFakeQuantize, which for
float32 inputs observes each block's e8m0 scale with quark.torch.quantization.utils.even_round and
rounds the elements half to even (round_method half_even). (For bf16/f16 inputs Quark runs its
CUDA/HIP kernel qdq_mxfp4, the same rule on 16-bit bits; it has no CPU implementation.)

Each line holds one block: the 32 inputs, then Quark's 32 outputs, as float32 bit patterns in hex.
The blocks: maxima at and around 1.75 * 2^e (where "even" rounds up) and at powers of two, over
the whole exponent range (e8m0's clamps at 2^-127 and 2^127, subnormals, FLT_MAX), elements at
e2m1's halfway points, a zero block, a NaN block, and random blocks of many magnitudes. Blocks
holding an infinity are left out: qmoe makes them NaN, where Quark keeps the infinity.
"""
import pathlib
import sys

import numpy
import torch

import quark
from quark.torch.quantization.config.config import OCP_MXFP4Spec
from quark.torch.quantization.tensor_quantize import FakeQuantizeBase

PINNED = {"quark": "0.13", "torch": "2.15.0"}
F32 = numpy.float32


def check_versions():
    found = {"quark": quark.__version__, "torch": torch.__version__.split("+")[0]}
    for name, want in PINNED.items():
        if not found[name].startswith(want):
            sys.exit(f"{name} {found[name]} found, this script pins {want}")


def block(head, fill=0.0):
    b = numpy.full(32, fill, dtype=F32)
    b[: len(head)] = numpy.array(head, dtype=F32)
    return b


def edge_blocks():
    blocks = []
    for e in (-126, -125, -124, -3, 0, 1, 5, 100, 126, 127):
        at = F32(numpy.ldexp(1.75, e))
        below = numpy.nextafter(at, F32(0))
        above = numpy.nextafter(at, F32(numpy.inf))
        two = F32(numpy.ldexp(1.0, e))
        for peak in (at, below, above, two, numpy.nextafter(two, F32(0)), F32(1.5) * two):
            # the peak (negated on odd e), and values a quarter and a tenth of it
            sign = -1 if e % 2 else 1
            blocks.append(block([sign * peak, peak / 4, -peak / 10, peak / 3, peak / 7]))
    finfo = numpy.finfo(F32)
    blocks.append(block([finfo.max, F32(1.2e38), F32(-3.0e38)]))
    blocks.append(block([finfo.smallest_subnormal, F32(1e-40)]))
    blocks.append(block([F32(2.0**-149) * 7, F32(2.0**-130)]))
    # e2m1 halfway points at scale 1 (max 6): 0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5 and negatives
    halves = [6.0, 0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, -0.25, -0.75, -2.5, -5.0, 5.5, 6.9, 7.5]
    blocks.append(block(halves))
    blocks.append(block([], fill=0.0))
    blocks.append(block([-0.0, 0.0, -0.0]))
    blocks.append(block([1.0, numpy.nan, 2.0], fill=0.5))
    return blocks


def random_blocks(rng, n):
    blocks = []
    for i in range(n):
        kind = i % 4
        if kind == 0:
            b = rng.standard_normal(32) * 10.0 ** rng.uniform(-37, 37)
        elif kind == 1:
            b = rng.standard_normal(32) * rng.choice([0.01, 1.0, 30.0])
        elif kind == 2:  # a peak near 1.75 * 2^e among smaller values
            b = rng.standard_normal(32)
            b[rng.integers(32)] = numpy.ldexp(rng.uniform(1.7, 1.8), int(rng.integers(-10, 10)))
        else:  # multiples of an eighth of a power of two: many exact halfway cases
            b = rng.integers(-56, 57, 32) * 2.0 ** int(rng.integers(-20, 20)) / 8
        blocks.append(b.astype(F32))
    return blocks


def main():
    check_versions()
    out = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "tests/data") / "quark-mxfp4-even-blocks.txt"
    spec = OCP_MXFP4Spec(ch_axis=-1, is_dynamic=True).to_quantization_spec()
    assert spec.scale_calculation_mode == "even", spec.scale_calculation_mode
    quantizer = FakeQuantizeBase.get_fake_quantize(spec)
    blocks = edge_blocks() + random_blocks(numpy.random.default_rng(20261205), 48)
    inputs = numpy.stack(blocks)
    assert numpy.all(~numpy.isinf(inputs)), "blocks with an infinity are left out"
    with torch.no_grad():
        outputs = quantizer(torch.from_numpy(inputs.copy())).numpy()
    lines = [
        f"# amd-quark {quark.__version__}, torch {torch.__version__}: OCP_MXFP4Spec(ch_axis=-1, "
        f"is_dynamic=True) input quantizer ({type(quantizer).__name__}), scale_calculation_mode even",
        "# one block per line: 32 inputs, then Quark's 32 outputs, float32 bits in hex "
        "(tests/data/make_quark_mx_table.py)",
    ]
    for x, y in zip(inputs, outputs):
        words = numpy.concatenate([x, y]).view(numpy.uint32)
        lines.append(" ".join(f"{w:08x}" for w in words))
    out.write_text("\n".join(lines) + "\n")
    print(f"{out}: {len(blocks)} blocks")


if __name__ == "__main__":
    main()
