"""qmoe.MoE.from_checkpoint on the AWQ and GPTQ fixtures that AutoAWQ, AutoGPTQ and GPTQModel
packed (tests/data/make_awq_gptq_fixtures.py), against the output the generator computed in float64
from the library's own decoding (reference/expected.safetensors): the Python path to a checkpoint
checked by a truth that qmoe had no part in."""
import numpy as np
import pytest

import qmoe
import reference

FIXTURES = [
    "awq-library-int4-g16-bias",
    "gptq-library-int4-g16-asym-desc_act",
    "gptq-library-int8-channel-sym-bias",
    "gptq-library-int8-g32-asym-desc_act-v2",
]
# f32 activations on exactly decoded weights: f32 rounding only (measured below 4e-7 in C++).
BOUND = 1e-5


@pytest.mark.parametrize("backend", ["cpu", "emulation"])
@pytest.mark.parametrize("fixture", FIXTURES)
def test_forward_matches_the_library_forward(data_dir, fixture, backend):
    path = data_dir / fixture
    expected = reference.read_safetensors(path / "reference" / "expected.safetensors")
    moe = qmoe.MoE.from_checkpoint(path, 0, backend=backend)
    out = np.full_like(expected["hidden"], np.nan)
    moe(expected["hidden"], expected["router_logits"], out)
    assert reference.relative_error(out, expected["output"].astype(np.float64)) < BOUND
