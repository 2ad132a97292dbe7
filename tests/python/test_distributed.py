"""qmoe.distributed: a layer split over 2 and 4 processes (torch.multiprocessing) of one
torch.distributed group, Gloo on the CPU. Every rank's output is checked against the unsharded
qmoe.MoE and against a float64 forward of the whole layer that qmoe had no part in: the output
GPTQ's own decoding gives (reference/expected.safetensors), or reference.py on the dequantized
weights. With 2 GPUs the same layer runs over NCCL. The planning and routing bindings are checked
without torch; the rest skips, with the reason, where torch is missing."""
import numpy as np
import pytest

import qmoe
import qmoe.distributed
import reference
from conftest import DATA

try:
    import torch
    import torch.distributed as dist
except ImportError:
    torch = dist = None

needs_torch = pytest.mark.skipif(
    dist is None or not dist.is_available(),
    reason="needs torch with torch.distributed "
    f"({'not installed' if torch is None else 'built without it'})",
)
needs_two_gpus = pytest.mark.skipif(
    torch is None or not (torch.cuda.device_count() >= 2 and qmoe.cuda_built
                          and dist.is_nccl_available()),
    reason="needs torch, 2 CUDA GPUs, NCCL and qmoe's CUDA backends"
    + ("" if torch is None else f" (GPUs: {torch.cuda.device_count()}, NCCL: "
       f"{dist.is_nccl_available()}, CUDA backends: {qmoe.cuda_built})"),
)

# GPTQ int8 channelwise, E 4, H 96, I 32, top-2, f16 biases on w13 and w2: TP 2 (16 channels per
# rank, 4 int8 codes per word) and EP 2 both split it.
FIXTURE = DATA / "gptq-library-int8-channel-sym-bias"
# f32 activations on exactly decoded weights: f32 rounding only, and the ranks' partial sums add
# one rounding per rank (the unsharded layer measures below 4e-7 against the library's output).
F32_BOUND = 1e-5
# bf16 activations, partial outputs and NCCL's bf16 sums: a few roundings of 2^-9.
BF16_BOUND = 2e-2


def library_io(rows=8):
    """The fixture's inputs and the library's float64 forward of the whole layer."""
    t = reference.read_safetensors(FIXTURE / "reference" / "expected.safetensors")
    return t["hidden"][:rows], t["router_logits"][:rows], t["output"][:rows].astype(np.float64)


def unsharded(x, logits):
    return qmoe.MoE.from_checkpoint(FIXTURE, 0, backend="cpu")(x, logits)


def random_layer(E, top_k, seed):
    """A random int4 g32 layer (the library's sampler) that TP 2 and EP 2 can split."""
    config = qmoe.MoEConfig(num_experts=E, hidden=64, intermediate=64, top_k=top_k)
    return qmoe.random_experts(config, qmoe.QuantScheme(bits=4, group_size=32), seed), config


def float64_forward(experts, config, x, logits):
    weights, ids = reference.route(logits, config.top_k)
    return reference.moe(x, experts.w13.dequantize(), experts.w2.dequantize(), weights, ids)


def run_ranks(tmp_path, world, case, *args, backend="gloo"):
    """Runs case(*args) on `world` processes of one process group; each rank's result, in rank
    order."""
    torch.multiprocessing.spawn(_rank_main, args=(world, backend, str(tmp_path), case, args),
                                nprocs=world)
    return [torch.load(tmp_path / f"rank{r}.pt") for r in range(world)]


def _rank_main(rank, world, backend, tmp, case, args):
    if backend == "nccl":
        torch.cuda.set_device(rank)
    dist.init_process_group(backend, init_method=f"file://{tmp}/init", rank=rank,
                            world_size=world)
    try:
        result = case(*args)
    finally:
        dist.destroy_process_group()
    torch.save(result, f"{tmp}/rank{rank}.pt")


def my_rows(t):
    """This rank's equal share of the rows of t, for token-split forwards."""
    n = t.shape[0] // dist.get_world_size()
    return t[dist.get_rank() * n:(dist.get_rank() + 1) * n]


# ---- what each rank runs ----


def checkpoint_forward(tp, ep, token_split, dtype=None):
    """On the group's default device: the CPU for Gloo, the rank's GPU for NCCL; f32 unless
    dtype says otherwise."""
    layer = qmoe.distributed.ShardedMoE.from_checkpoint(FIXTURE, 0, tp_size=tp, ep_size=ep)
    x, logits, _ = library_io()
    device = layer.local.device
    x = torch.from_numpy(x).to(device, dtype or torch.float32)
    logits = torch.from_numpy(logits).to(device)
    if token_split:
        return layer.forward_token_split(my_rows(x), my_rows(logits)).cpu()
    return layer(x, logits).cpu()


def random_forward(E, top_k, seed, tp, ep, x, logits):
    experts, config = random_layer(E, top_k, seed)
    layer = qmoe.distributed.ShardedMoE(config, experts, tp_size=tp, ep_size=ep, backend="cpu")
    x, logits = torch.from_numpy(x), torch.from_numpy(logits)
    return {"out": layer(x, logits), "partial": layer._partial_forward(x, logits),
            "local_experts": layer.local.config.num_experts}


def compiled_op_forward():
    layer = qmoe.distributed.ShardedMoE.from_checkpoint(FIXTURE, 0, tp_size=2, backend="cpu")
    x, logits, _ = library_io()
    x, logits = torch.from_numpy(x), torch.from_numpy(logits)
    torch.library.opcheck(torch.ops.qmoe.sharded_moe_forward.default, (layer.op_id, x, logits))
    return torch.compile(layer.forward, fullgraph=True, backend="aot_eager")(x, logits)


def refusals():
    def message(**kwargs):
        with pytest.raises(qmoe.Error) as e:
            qmoe.distributed.ShardedMoE.from_checkpoint(**kwargs)
        return str(e.value)

    return [message(path=FIXTURE, tp_size=2, ep_size=2),
            message(path=DATA / "ct-library-int4-g32-asym", tp_size=2)]


# ---- the tests ----


def test_plan_refuses_a_split_that_cuts_a_packed_word():
    ckpt = qmoe.Checkpoint(DATA / "ct-library-int4-g32-asym")
    with pytest.raises(qmoe.Error, match="TP sizes that work: 1"):
        qmoe.distributed.plan_shards(ckpt.scheme, ckpt.layer_config(0), 2, 1)


def test_each_rank_sees_the_whole_layers_routing_on_its_own_experts():
    experts, config = random_layer(E=5, top_k=2, seed=5)
    plan = qmoe.distributed.plan_shards(experts, config, 1, 2)
    logits = np.random.default_rng(5).standard_normal((6, 5)).astype(np.float32)
    expected_weights, expected_ids = reference.route(logits, config.top_k)
    summed = np.zeros_like(expected_weights)
    for shard in plan.ranks:
        weights = np.empty((6, 2), np.float32)
        ids = np.empty((6, 2), np.int32)
        qmoe.distributed.route_topk(config, logits, weights, ids)
        assert np.array_equal(ids, expected_ids)
        np.testing.assert_allclose(weights, expected_weights, rtol=1e-6)
        qmoe.distributed.localize_routing(plan, shard.rank, weights, ids)
        mine = (expected_ids >= shard.first_expert) & (
            expected_ids < shard.first_expert + shard.num_experts)
        assert np.array_equal(ids, np.where(mine, expected_ids - shard.first_expert, 0))
        assert not weights[~mine].any()
        summed += weights
    np.testing.assert_allclose(summed, expected_weights, rtol=1e-6)  # each slot on one rank


@needs_torch
@pytest.mark.parametrize("tp, ep", [(2, 1), (1, 2), (2, 2)])
def test_replicated_tokens_give_the_whole_layer_with_its_bias_once(tmp_path, tp, ep):
    assert qmoe.Checkpoint(FIXTURE).layer_config(0).w2_bias  # the bias whose sum is checked
    outs = run_ranks(tmp_path, tp * ep, checkpoint_forward, tp, ep, False)
    x, logits, expected = library_io()
    single = unsharded(x, logits)
    for out in outs:
        assert torch.equal(out, outs[0])  # every rank the same bits
        assert reference.relative_error(out.numpy(), single.astype(np.float64)) < F32_BOUND
        assert reference.relative_error(out.numpy(), expected) < F32_BOUND


@needs_torch
@pytest.mark.parametrize("tp, ep", [(1, 2), (2, 2)])
def test_token_split_gives_each_rank_its_own_rows(tmp_path, tp, ep):
    outs = run_ranks(tmp_path, tp * ep, checkpoint_forward, tp, ep, True)
    x, logits, expected = library_io()
    assert all(out.shape == (x.shape[0] // (tp * ep), x.shape[1]) for out in outs)
    out = torch.cat(outs).numpy()
    assert reference.relative_error(out, unsharded(x, logits).astype(np.float64)) < F32_BOUND
    assert reference.relative_error(out, expected) < F32_BOUND


@needs_torch
def test_odd_expert_count_over_two_ranks(tmp_path):
    experts, config = random_layer(E=5, top_k=2, seed=3)
    rng = np.random.default_rng(3)
    x = rng.standard_normal((7, config.hidden)).astype(np.float32)
    logits = rng.standard_normal((7, config.num_experts)).astype(np.float32)
    ranks = run_ranks(tmp_path, 2, random_forward, 5, 2, 3, 1, 2, x, logits)
    assert [r["local_experts"] for r in ranks] == [3, 2]
    single = qmoe.MoE(config, experts, backend="cpu")(x, logits).astype(np.float64)
    expected = float64_forward(experts, config, x, logits)
    for r in ranks:
        assert reference.relative_error(r["out"].numpy(), single) < F32_BOUND
        assert reference.relative_error(r["out"].numpy(), expected) < F32_BOUND


@needs_torch
def test_a_rank_with_no_routed_tokens_adds_nothing_and_still_sums(tmp_path):
    experts, config = random_layer(E=4, top_k=2, seed=4)
    rng = np.random.default_rng(4)
    x = rng.standard_normal((5, config.hidden)).astype(np.float32)
    logits = rng.standard_normal((5, config.num_experts)).astype(np.float32)
    logits[:, :2] += 20.0  # every token to experts 0 and 1, both on rank 0 of EP 2
    ranks = run_ranks(tmp_path, 2, random_forward, 4, 2, 4, 1, 2, x, logits)
    assert not ranks[1]["partial"].any()
    expected = float64_forward(experts, config, x, logits)
    for r in ranks:
        assert reference.relative_error(r["out"].numpy(), expected) < F32_BOUND


@needs_torch
def test_forward_is_a_custom_op_that_compiles(tmp_path):
    outs = run_ranks(tmp_path, 2, compiled_op_forward)
    _, _, expected = library_io()
    for out in outs:
        assert reference.relative_error(out.numpy(), expected) < F32_BOUND


@needs_torch
def test_refusals_name_the_sizes(tmp_path):
    group_size, packed_word = run_ranks(tmp_path, 2, refusals)[0]
    assert "the process group has 2 ranks but tp_size 2 x ep_size 2 needs 4" in group_size
    assert "TP sizes that work: 1" in packed_word


@needs_two_gpus
@pytest.mark.parametrize("tp, ep, token_split", [(2, 1, False), (1, 2, False), (2, 1, True)])
def test_nccl_ranks_on_two_gpus(tmp_path, tp, ep, token_split):
    outs = run_ranks(tmp_path, 2, checkpoint_forward, tp, ep, token_split, torch.bfloat16,
                     backend="nccl")
    _, _, expected = library_io()
    out = torch.cat(outs) if token_split else outs[0]
    assert reference.relative_error(out.double().numpy(), expected) < BF16_BOUND
