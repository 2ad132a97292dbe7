"""qmoe with torch tensors: zero copy, streams, the custom op, CUDA graphs and torch.compile.
Skipped, with the reason, where torch (or a CUDA GPU, or qmoe's CUDA backends) is missing."""
import pytest

import qmoe
import reference

torch = pytest.importorskip("torch", reason="torch is not installed")

needs_gpu = pytest.mark.skipif(
    not (torch.cuda.is_available() and qmoe.cuda_built),
    reason="needs a CUDA GPU and qmoe built with its CUDA backends "
    f"(torch sees a GPU: {torch.cuda.is_available()}, CUDA backends built: {qmoe.cuda_built})",
)

# The cuda-mma bound of tests/cuda_mma (bf16: four roundings of 2^-9, ~2.5e-3; bound 1e-2).
BF16_BOUND = 1e-2
F32_BOUND = 1e-5


def random_layer(E=16, H=256, I=384, top_k=4, seed=0):
    """A random int4 g128 layer (the library's sampler): its experts and config."""
    config = qmoe.MoEConfig(num_experts=E, hidden=H, intermediate=I, top_k=top_k)
    return qmoe.random_experts(config, qmoe.QuantScheme(bits=4, group_size=128), seed), config


def dequantized(experts):
    return experts.w13.dequantize(), experts.w2.dequantize()


def expected(experts, config, x, logits):
    weights, ids = reference.route(logits.double().cpu().numpy(), config.top_k)
    w13, w2 = dequantized(experts)
    return reference.moe(x.double().cpu().numpy(), w13, w2, weights, ids)


def test_cpu_tensors_in_place():
    experts, config = random_layer(E=8, H=128, I=128, top_k=2)
    moe = qmoe.MoE(config, experts, backend="cpu")
    x = torch.randn(5, 128)
    logits = torch.randn(5, 8)
    out = torch.full_like(x, float("nan"))
    result = moe(x, logits, out)
    assert result is out
    assert reference.relative_error(out.numpy(), expected(experts, config, x, logits)) < F32_BOUND


def test_custom_op_on_the_cpu_and_its_fake():
    experts, config = random_layer(E=8, H=128, I=128, top_k=2, seed=1)
    moe = qmoe.MoE(config, experts, backend="cpu")
    x, logits = torch.randn(3, 128), torch.randn(3, 8)
    y = torch.ops.qmoe.moe_forward(moe.op_id, x, logits)
    assert reference.relative_error(y.numpy(), expected(experts, config, x, logits)) < F32_BOUND
    torch.library.opcheck(torch.ops.qmoe.moe_forward.default, (moe.op_id, x, logits))


def test_errors_surface_as_qmoe_error():
    experts, config = random_layer(E=8, H=128, I=128, top_k=2, seed=2)
    moe = qmoe.MoE(config, experts, backend="cpu")
    with pytest.raises(qmoe.Error, match="x must have 2 dimensions"):
        moe(torch.randn(128), torch.randn(1, 8))
    with pytest.raises(qmoe.Error, match="must be contiguous"):
        moe(torch.randn(128, 4).t(), torch.randn(4, 8))


# ---- CUDA ----


def gpu_layer(seed, **shape):
    experts, config = random_layer(seed=seed, **shape)
    return experts, config, qmoe.MoE(config, experts, device="cuda:0", max_tokens=8)


@needs_gpu
def test_zero_copy_bf16_and_bf16_logits():
    experts, config, moe = gpu_layer(10)
    x = torch.randn(7, config.hidden, device="cuda", dtype=torch.bfloat16)
    logits = torch.randn(7, config.num_experts, device="cuda", dtype=torch.bfloat16)
    out = torch.empty_like(x)
    ptr = out.data_ptr()
    result = moe(x, logits, out)
    torch.cuda.synchronize()
    assert result is out and result.data_ptr() == ptr
    assert reference.relative_error(out.float().cpu().numpy(),
                                    expected(experts, config, x, logits.float())) < BF16_BOUND


@needs_gpu
def test_work_lands_on_the_current_non_default_stream():
    experts, config, moe = gpu_layer(11)
    x = torch.randn(4, config.hidden, device="cuda", dtype=torch.bfloat16)
    logits = torch.randn(4, config.num_experts, device="cuda")
    side = torch.cuda.Stream()
    out = torch.full_like(x, float("nan"))
    torch.cuda.synchronize()
    with torch.cuda.stream(side):
        # Keep the side stream busy first, so work put on any other stream would finish first.
        torch.cuda._sleep(50_000_000)
        moe(x, logits, out)
        done = torch.cuda.Event()
        done.record(side)
    assert not done.query()  # queued behind the sleep on `side`
    side.synchronize()
    assert reference.relative_error(out.float().cpu().numpy(),
                                    expected(experts, config, x, logits)) < BF16_BOUND


@needs_gpu
def test_graph_at_one_token_survives_a_large_eager_forward():
    experts, config, moe = gpu_layer(12)
    moe.reserve(1)
    x = torch.randn(1, config.hidden, device="cuda", dtype=torch.bfloat16)
    logits = torch.randn(1, config.num_experts, device="cuda")
    out = torch.empty_like(x)
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        moe.reserve(1)
        moe(x, logits, out)  # warm-up on the capture stream
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=stream):
        moe(x, logits, out)
    # Eager prefill on the same stream: the workspace grows.
    big_x = torch.randn(4096, config.hidden, device="cuda", dtype=torch.bfloat16)
    big_logits = torch.randn(4096, config.num_experts, device="cuda")
    with torch.cuda.stream(stream):
        big_out = moe(big_x, big_logits)
    stream.synchronize()
    filler = [torch.full((1 << 20,), float("nan"), device="cuda") for _ in range(64)]
    out.fill_(float("nan"))
    graph.replay()
    torch.cuda.synchronize()
    assert reference.relative_error(out.float().cpu().numpy(),
                                    expected(experts, config, x, logits)) < BF16_BOUND
    # A graph writing into memory freed under it would have written into these.
    assert all(bool(torch.isnan(f).all()) for f in filler)
    rows = slice(0, 64)  # the float64 reference of 4096 rows is slow; 64 of them suffice
    assert reference.relative_error(
        big_out[rows].float().cpu().numpy(),
        expected(experts, config, big_x[rows], big_logits[rows])) < BF16_BOUND
    del filler


@needs_gpu
def test_growth_during_capture_is_a_qmoe_error_naming_reserve():
    _, config, moe = gpu_layer(13)
    x = torch.randn(64, config.hidden, device="cuda", dtype=torch.bfloat16)
    logits = torch.randn(64, config.num_experts, device="cuda")
    out = torch.empty_like(x)
    graph = torch.cuda.CUDAGraph()
    with pytest.raises(qmoe.Error, match="MoE::reserve"):
        with torch.cuda.graph(graph):
            moe(x, logits, out)


class Block(torch.nn.Module):
    def __init__(self, moe, hidden, experts):
        super().__init__()
        self.gate = torch.nn.Linear(hidden, experts, bias=False, device="cuda", dtype=torch.bfloat16)
        self.requires_grad_(False)  # serving: the op has no autograd formula to trace
        self.moe = moe
        self.layer = moe.op_id  # a plain int, a constant to torch.compile

    def forward(self, x):
        return torch.ops.qmoe.moe_forward(self.layer, x, self.gate(x))


@needs_gpu
def test_custom_op_under_torch_compile_fullgraph_and_graph_capture():
    experts, config, moe = gpu_layer(14)
    block = Block(moe, config.hidden, config.num_experts)
    x = torch.randn(3, config.hidden, device="cuda", dtype=torch.bfloat16)
    eager = block(x)
    compiled = torch.compile(block, fullgraph=True)
    # The compiled router may round differently from the eager one.
    assert reference.relative_error(compiled(x).float().cpu().numpy(),
                                    eager.double().cpu().numpy()) < BF16_BOUND
    logits = block.gate(x).float()
    assert reference.relative_error(eager.float().cpu().numpy(),
                                    expected(experts, config, x, logits)) < BF16_BOUND
    stream = torch.cuda.Stream()
    moe.reserve(8, stream)
    static_x = x.clone()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        block(static_x)
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=stream):
        static_y = block(static_x)
    graph.replay()
    torch.cuda.synchronize()
    assert reference.relative_error(static_y.float().cpu().numpy(),
                                    eager.double().cpu().numpy()) < BF16_BOUND
