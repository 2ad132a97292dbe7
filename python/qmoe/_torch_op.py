"""torch.ops.qmoe.moe_forward / moe_forward_routed: a MoE layer as a PyTorch custom operator with
a fake (meta) implementation, so that torch.compile(fullgraph=True) traces through it and
torch.cuda.graph captures it. Registered when torch is importable.

    y = torch.ops.qmoe.moe_forward(moe.op_id, x, router_logits)
"""
import itertools
import weakref

_layers = weakref.WeakValueDictionary()  # op id -> MoE
_ids = itertools.count(1)


def op_id(moe) -> int:
    """The integer the custom ops take to name `moe` (the layer must stay alive while used)."""
    layer_id = getattr(moe, "_op_id", None)
    if layer_id is None:
        layer_id = next(_ids)
        moe._op_id = layer_id
        _layers[layer_id] = moe
    return layer_id


def register() -> None:
    try:
        import torch
    except ImportError:
        return
    from ._moe import MoE

    MoE.op_id = property(op_id)

    @torch.library.custom_op("qmoe::moe_forward", mutates_args=())
    def moe_forward(layer: int, x: torch.Tensor, router_logits: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        return _layers[layer](x, router_logits.contiguous())

    @moe_forward.register_fake
    def _(layer, x, router_logits):
        return torch.empty(x.shape, dtype=x.dtype, device=x.device)

    @torch.library.custom_op("qmoe::moe_forward_routed", mutates_args=())
    def moe_forward_routed(layer: int, x: torch.Tensor, topk_weights: torch.Tensor,
                           topk_ids: torch.Tensor) -> torch.Tensor:
        return _layers[layer].forward_routed(x.contiguous(), topk_weights.contiguous(),
                                             topk_ids.contiguous())

    @moe_forward_routed.register_fake
    def _(layer, x, topk_weights, topk_ids):
        return torch.empty(x.shape, dtype=x.dtype, device=x.device)
