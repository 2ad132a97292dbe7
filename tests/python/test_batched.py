"""qmoe.MoE.forward_batched on the CPU backends with NumPy arrays: each live row of x [E, T_max, H]
against reference.py's float64 MLP of its expert alone (weight 1), on compressed-tensors' own
dequantized weights; rows past each count untouched."""
import numpy as np
import pytest

import qmoe
import reference

FIXTURE = "ct-library-int4-g32-asym"
BOUNDS = {np.float32: 1e-5, np.float16: 5e-3}  # as test_moe_numpy.py


def layer(data_dir):
    path = data_dir / FIXTURE
    cfg = qmoe.Checkpoint(path).config
    w13, w2 = reference.stacked_reference_weights(
        path / "reference" / "dequantized.safetensors", 0, cfg.num_experts
    )
    return path, cfg, w13, w2


@pytest.mark.parametrize("backend", ["cpu", "emulation"])
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("T_max", [1, 5])
def test_every_live_row_is_its_experts_mlp(data_dir, backend, dtype, T_max):
    path, cfg, w13, w2 = layer(data_dir)
    E = cfg.num_experts
    rng = np.random.default_rng(T_max)
    x = rng.standard_normal((E, T_max, cfg.hidden)).astype(dtype)
    counts = np.array([(T_max, 0, 1)[e % 3] for e in range(E)], dtype=np.int64)
    moe = qmoe.MoE.from_checkpoint(path, 0, backend=backend)
    out = np.full_like(x, 7.0)
    assert moe.forward_batched(x, counts, out) is out  # written in place
    for e in range(E):
        n = int(counts[e])
        if n:
            ones, ids = np.ones((n, 1)), np.full((n, 1), e)
            ref = reference.moe(x[e, :n], w13, w2, ones, ids)
            assert reference.relative_error(out[e, :n], ref) < BOUNDS[dtype], e
        assert (out[e, n:] == 7.0).all(), f"rows of expert {e} past its count were written"


def test_out_is_allocated_and_bad_counts_are_errors(data_dir):
    path, cfg, _, _ = layer(data_dir)
    E = cfg.num_experts
    moe = qmoe.MoE.from_checkpoint(path, 0, backend="cpu")
    x = np.zeros((E, 2, cfg.hidden), np.float32)
    out = moe.forward_batched(x, np.zeros(E, np.int32))
    assert out.shape == x.shape and out.dtype == np.float32
    with pytest.raises(qmoe.Error, match=r"counts\[0\] = 3 is not a row count"):
        moe.forward_batched(x, np.full(E, 3, np.int32))
    with pytest.raises(qmoe.Error, match="x must have 3 dimensions"):
        moe.forward_batched(x[0], np.zeros(E, np.int32))
