"""qmoe.MoE on the CPU backends with NumPy arrays, against the float64 NumPy MoE of reference.py
on compressed-tensors' own dequantized weights (tests/data/ct-library-*)."""
import numpy as np
import pytest

import qmoe
import reference

FIXTURE = "ct-library-int4-g32-asym"
# f32 activations: the backends accumulate in f32 on exactly dequantized weights, so the error is
# f32 rounding (~1e-7 relative); 1e-5 leaves room for the order of sums. f16 activations and
# outputs round to 11 bits (2^-11 ~ 5e-4 per element, several roundings): 5e-3.
BOUNDS = {np.float32: 1e-5, np.float16: 5e-3}


def case(data_dir, M, seed):
    path = data_dir / FIXTURE
    ckpt = qmoe.Checkpoint(path)
    cfg = ckpt.config
    w13, w2 = reference.stacked_reference_weights(
        path / "reference" / "dequantized.safetensors", 0, cfg.num_experts
    )
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((M, cfg.hidden)).astype(np.float32)
    logits = rng.standard_normal((M, cfg.num_experts)).astype(np.float32)
    weights, ids = reference.route(logits, cfg.top_k, cfg.routing.renormalize)
    return path, x, logits, weights, ids, reference.moe(x, w13, w2, weights, ids)


@pytest.mark.parametrize("backend", ["cpu", "emulation"])
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("M", [1, 7, 33])
def test_forward_matches_the_float64_reference(data_dir, backend, dtype, M):
    path, x, logits, _, _, ref = case(data_dir, M, seed=M)
    moe = qmoe.MoE.from_checkpoint(path, 0, backend=backend)
    assert moe.backend == backend
    x = x.astype(dtype)
    out = np.full_like(x, np.nan)
    result = moe(x, logits, out)
    assert result is out  # written in place, no copy
    assert reference.relative_error(out, ref) < BOUNDS[dtype]


def test_forward_allocates_out_when_none_and_takes_f16_logits(data_dir):
    path, x, logits, _, _, ref = case(data_dir, 5, seed=3)
    moe = qmoe.MoE.from_checkpoint(path)
    out = moe(x, logits.astype(np.float16))
    assert out.shape == x.shape and out.dtype == np.float32
    # f16 logits move the routing weights by ~1e-3 of themselves.
    assert reference.relative_error(out, ref) < 5e-3


def test_forward_routed_takes_int64_ids(data_dir):
    path, x, _, weights, ids, ref = case(data_dir, 9, seed=4)
    moe = qmoe.MoE.from_checkpoint(path, backend="cpu")
    out = moe.forward_routed(x, weights.astype(np.float32), ids.astype(np.int64))
    assert reference.relative_error(out, ref) < BOUNDS[np.float32]


def test_out_may_be_a_strided_view_into_a_larger_array(data_dir):
    path, x, logits, _, _, ref = case(data_dir, 4, seed=5)
    moe = qmoe.MoE.from_checkpoint(path)
    big = np.zeros((8, x.shape[1]), dtype=np.float32)
    moe(x, logits, big[2:6])  # rows 2..5: contiguous rows inside a larger buffer
    assert reference.relative_error(big[2:6], ref) < BOUNDS[np.float32]
    assert not big[:2].any() and not big[6:].any()


def test_from_tensors_equals_from_checkpoint(data_dir):
    path, x, logits, _, _, _ = case(data_dir, 6, seed=6)
    ckpt = qmoe.Checkpoint(path)
    experts = ckpt.load_layer(0)

    def parts(w):
        d = {"codes": w.codes, "scales": w.scales}
        if w.scheme.zero_points:
            d["zeros"] = w.zeros
        return d

    rebuilt = qmoe.MoE.from_tensors(ckpt.config, ckpt.scheme, parts(experts.w13), parts(experts.w2))
    original = qmoe.MoE.from_checkpoint(path)
    np.testing.assert_array_equal(rebuilt(x, logits), original(x, logits))


def test_errors_are_value_errors_naming_the_problem(data_dir):
    path, x, logits, _, _, _ = case(data_dir, 3, seed=7)
    moe = qmoe.MoE.from_checkpoint(path)
    with pytest.raises(qmoe.Error, match=r"router_logits must be \[3, 4\]"):
        moe(x, logits[:, :3])
    with pytest.raises(ValueError, match="out must have the dtype of hidden"):
        moe(x, logits, np.empty(x.shape, dtype=np.float16))
    with pytest.raises(qmoe.Error, match="cuda-mma"):
        qmoe.MoE.from_checkpoint(path, backend="cuda-mma")


def test_selection_and_explain(data_dir):
    path = data_dir / FIXTURE
    moe = qmoe.MoE.from_checkpoint(path)
    chosen = [v for v in moe.selection.verdicts if v.chosen]
    assert [v.backend for v in chosen] == [moe.backend]
    assert moe.selection.backend == moe.backend
    on_hopper = qmoe.explain(path, device="sm_90")
    if qmoe.cuda_built:
        assert on_hopper.backend == "cuda-mma"
    else:
        assert on_hopper.backend == "" and "built without CUDA" in on_hopper.error
    emulation = [v for v in on_hopper.verdicts if v.backend == "emulation"]
    assert emulation and not emulation[0].chosen and emulation[0].reason
    # On sm_90 the plan pairs cuda-mma with cuda-wgmma where cuda-wgmma can run the layer and its
    # cost model overtakes cuda-mma's: not this g32 fixture, but an int4 g128 layer of Qwen3-30B-A3B's
    # shape in a build with cuda-wgmma (CUTLASS).
    assert on_hopper.plan == []
    g128 = qmoe.explain(scheme=qmoe.QuantScheme(bits=4, group_size=128),
                        config=qmoe.MoEConfig(num_experts=128, hidden=2048, intermediate=768,
                                              top_k=8),
                        device="sm_90")
    wgmma = [v for v in g128.verdicts if v.backend == "cuda-wgmma"][0]
    if wgmma.compatible:
        assert [p.backend for p in g128.plan] == ["cuda-mma", "cuda-wgmma"]
        # measured on an H100, the two kernels cross between 32 and 48 rows per expert (M = 512
        # and 768 at top-8 of 128 experts)
        assert g128.plan[0].from_tokens == 1 and 512 <= g128.plan[1].from_tokens <= 768
        # cuda-wgmma reads cuda-mma's int4 codes of w13 [128, 1536, 2048] and w2 [128, 2048, 768]
        # and adds only its bf16 scales (groups of 128)
        assert g128.plan[0].weight_bytes == 0 and g128.plan[1].shared_bytes == 301989888
        assert g128.plan[1].weight_bytes == 9437184
        # by default the layer holds cuda-mma's copy and those scales
        assert g128.weight_bytes > 301989888
        assert g128.default_weight_bytes == g128.weight_bytes + 9437184
    else:
        assert g128.plan == [] and "not built" in wgmma.reason
        assert g128.default_weight_bytes == g128.weight_bytes
    mxfp4 = qmoe.explain(data_dir / "gpt-oss-mxfp4-bias", device="sm_90")
    cuda_mma = [v for v in mxfp4.verdicts if v.backend == "cuda-mma"][0]
    assert cuda_mma.compatible or "not built" in cuda_mma.reason


def test_reserve_is_accepted_on_the_cpu(data_dir):
    moe = qmoe.MoE.from_checkpoint(data_dir / FIXTURE, max_tokens=128)
    moe.reserve(256)
    with pytest.raises(qmoe.Error, match="max_tokens must be at least 1"):
        moe.reserve(0)


def test_cpu_threads_can_be_set_and_do_not_change_the_result(data_dir):
    path, x, logits, _, _, ref = case(data_dir, 33, seed=5)
    moe = qmoe.MoE.from_checkpoint(path, 0, backend="cpu")
    before = qmoe.cpu_threads()
    assert 1 <= qmoe.usable_cpus()
    try:
        outs = []
        for threads in (1, 3):
            qmoe.set_cpu_threads(threads)
            assert qmoe.cpu_threads() == threads
            outs.append(moe(x, logits))
        with pytest.raises(qmoe.Error, match=r"valid: 1\.\.1024"):
            qmoe.set_cpu_threads(0)
    finally:
        qmoe.set_cpu_threads(before)
    assert np.array_equal(outs[0], outs[1])
    assert reference.relative_error(outs[0], ref) < BOUNDS[np.float32]
