import os

from . import _qmoe
from ._checkpoint import Checkpoint
from . import _tensors


def _device_name(device) -> str:
    text = str(device)  # accepts torch.device too
    return "cuda:0" if text == "cuda" else text


class MoE:
    """A quantized MoE layer on a device ("cpu" or "cuda:N"), on the backend the oracle picks
    ("auto") or a named one ("cpu", "cuda-mma", "emulation").

    moe(x, router_logits, out=None, stream=None) routes and runs x [M, H] (float32, float16 or
    bfloat16; torch, NumPy or any DLPack array) with router_logits [M, E] (float32 or x's dtype)
    into out [M, H] of x's dtype (allocated when None) and returns out. forward_routed takes the
    routing instead: topk_weights [M, k] and topk_ids [M, k]. Inputs and outputs are used in place:
    no copy. On CUDA the work runs on `stream` (an int cudaStream_t) or torch's current stream.
    """

    def __init__(self, config, experts, *, backend="auto", device="cpu", max_tokens=None,
                 stream=None):
        self._core = _qmoe.MoE(config, experts, backend, _device_name(device))
        self.device = _device_name(device)
        if max_tokens is not None:
            self.reserve(max_tokens, stream)

    @classmethod
    def from_checkpoint(cls, path, layer=None, *, device="cpu", backend="auto", max_tokens=None,
                        stream=None, as_moe_wna16=False):
        """The MoE layer `layer` (default: the first) of a checkpoint directory."""
        ckpt = path if isinstance(path, Checkpoint) else Checkpoint(os.fspath(path), as_moe_wna16)
        if layer is None:
            layer = ckpt.layers[0]
        return cls(ckpt.layer_config(layer), ckpt.load_layer(layer), backend=backend,
                   device=device, max_tokens=max_tokens, stream=stream)

    @classmethod
    def from_tensors(cls, config, scheme, w13, w2, **kwargs):
        """From canonical tensors an engine holds: w13 and w2 are dicts with codes, scales and,
        as the scheme needs, zeros, g_idx and bias (see qmoe.QuantizedWeight). Weights are copied
        once into the backend's layout."""
        experts = _qmoe.QuantizedExperts(_qmoe.QuantizedWeight(scheme, **w13),
                                         _qmoe.QuantizedWeight(scheme, **w2))
        return cls(config, experts, **kwargs)

    @classmethod
    def from_layout(cls, format, tensors, config, scheme, *, gptq_version=1, **kwargs):
        """From a layer's tensors in a checkpoint format's layout ("gptq", "awq",
        "compressed-tensors", "quark"), named "{expert}.{gate_proj|up_proj|down_proj}.{tensor}",
        read by the checkpoint reader's adapters (qmoe.experts_from_layout)."""
        experts = _qmoe.experts_from_layout(format, tensors, config, scheme, gptq_version)
        return cls(config, experts, **kwargs)

    @property
    def config(self) -> _qmoe.MoEConfig:
        return self._core.config

    @property
    def backend(self) -> str:
        return self._core.backend

    @property
    def selection(self) -> _qmoe.Selection:
        """The oracle's verdict on every backend for this layer and device."""
        return self._core.selection

    def reserve(self, max_tokens: int, stream=None) -> None:
        """Makes the scratch memory that forwards of up to max_tokens tokens on `stream` use, so
        that they allocate nothing: required before capturing forwards in a CUDA graph."""
        if stream is None and self.device.startswith("cuda"):
            torch = _tensors.torch_module()
            if torch is not None:
                stream = torch.cuda.current_stream(self.device).cuda_stream
        self._core.reserve(max_tokens, _stream_int(stream))

    def __call__(self, x, router_logits, out=None, *, stream=None):
        router_logits = _tensors.as_float32(router_logits)
        if out is None:
            out = _tensors.empty_like(x)
        if _tensors.is_torch(x):
            s = _tensors.current_stream(x) if stream is None else _stream_int(stream)
            self._core.forward_described(_tensors.describe(x, "x"),
                                         _tensors.describe(router_logits, "router_logits"),
                                         _tensors.describe(out, "out"), s)
        else:
            self._core.forward(x, router_logits, out, _stream_int(stream))
        return out

    def forward_routed(self, x, topk_weights, topk_ids, out=None, *, stream=None):
        topk_weights = _tensors.as_float32(topk_weights)
        topk_ids = _tensors.as_int32(topk_ids)
        if out is None:
            out = _tensors.empty_like(x)
        if _tensors.is_torch(x):
            s = _tensors.current_stream(x) if stream is None else _stream_int(stream)
            self._core.forward_routed_described(
                _tensors.describe(x, "x"), _tensors.describe(topk_weights, "topk_weights"),
                _tensors.describe(topk_ids, "topk_ids"), _tensors.describe(out, "out"), s)
        else:
            self._core.forward_routed(x, topk_weights, topk_ids, out, _stream_int(stream))
        return out

    def forward_batched(self, x, counts, out=None, *, stream=None):
        """The batched-experts format (DeepEP's low-latency dispatch): x [E, T_max, H] holds each
        local expert's rows, counts [E] how many of them are real (int32, int64 is converted; on
        the MoE's device: host memory for cpu/emulation). For t < counts[e], out[e, t] becomes
        expert e's MLP of x[e, t], without any router weight; rows from counts[e] on are not
        written. out [E, T_max, H] of x's dtype is allocated when None; returns out."""
        counts = _tensors.as_int32(counts)
        if out is None:
            out = _tensors.empty_like(x)
        if _tensors.is_torch(x):
            s = _tensors.current_stream(x) if stream is None else _stream_int(stream)
            self._core.forward_batched_described(
                _tensors.describe(x, "x", 3), _tensors.describe(counts, "counts", 1),
                _tensors.describe(out, "out", 3), s)
        else:
            self._core.forward_batched(x, counts, out, _stream_int(stream))
        return out

    def __repr__(self) -> str:
        return f"MoE({self.config!r}, backend={self.backend!r}, device={self.device!r})"


def _stream_int(stream) -> int:
    if stream is None:
        return 0
    if isinstance(stream, int):
        return stream
    return int(getattr(stream, "cuda_stream", stream))  # torch.cuda.Stream


def explain(source=None, *, layer=None, scheme=None, config=None, device="cpu", backend="auto"):
    """The oracle's verdicts (a qmoe.Selection) for a checkpoint's layer (source: a path or a
    Checkpoint; layer default: the first) or for a scheme and config, on a real or described
    device ("cpu", "cuda:0", "sm_90", "h100", ...)."""
    if source is not None:
        ckpt = source if isinstance(source, Checkpoint) else Checkpoint(os.fspath(source))
        scheme = ckpt.scheme
        config = ckpt.layer_config(ckpt.layers[0] if layer is None else layer)
    if scheme is None or config is None:
        raise _qmoe.Error("explain needs a checkpoint, or both scheme= and config=")
    return _qmoe.explain(scheme, config, str(device), backend)
