"""qmoe.distributed: one MoE layer split over the ranks of a torch.distributed process group,
tensor parallel (each rank a slice of every expert's intermediate channels) times expert parallel
(each rank a block of experts), its partial outputs summed with the group's own collectives (NCCL
on GPUs, Gloo on the CPU). Every rank of the group runs the same calls in the same order.

    import torch.distributed as dist, qmoe.distributed
    dist.init_process_group("nccl")           # or "gloo" for CPU ranks
    layer = qmoe.distributed.ShardedMoE.from_checkpoint(path, 0, tp_size=2, ep_size=1)
    out = layer(x, router_logits)              # the same tokens on every rank
    mine = layer.forward_token_split(x, router_logits)  # each rank its own tokens

The forwards are torch custom ops (torch.ops.qmoe.sharded_moe_forward and
sharded_moe_forward_token_split, taking layer.op_id), opaque to torch.compile. Routing runs on the
host for the whole layer on every rank (the same ids everywhere): on CUDA that copies the router
logits to the host, a synchronisation per forward, so these forwards are not capturable in a CUDA
graph.
"""
import os

from . import _qmoe, _torch_op
from ._checkpoint import Checkpoint
from ._moe import MoE
from ._qmoe import RankShard, ShardPlan, localize_routing, plan_shards, route_topk

__all__ = ["RankShard", "ShardPlan", "ShardedMoE", "localize_routing", "plan_shards", "route_topk"]

try:
    import torch
    import torch.distributed as dist
except ImportError:
    torch = dist = None


class ShardedMoE:
    """This process's rank of a MoE layer split by a ShardPlan over a torch.distributed group of
    tp_size * ep_size ranks (rank = ep_rank * tp_size + tp_rank, the group's rank).

    plan: the qmoe.ShardPlan; rank: this rank; local: the rank's slice, an ordinary qmoe.MoE of
    its experts and channels; config: the whole layer's config; group: the process group.
    """

    def __init__(self, config, experts, *, tp_size=1, ep_size=1, group=None, backend="auto",
                 device=None, max_tokens=None):
        """From the whole layer's experts (qmoe.QuantizedExperts); the rank keeps its slice."""
        group, rank = _group_rank(group, tp_size, ep_size)
        plan = _qmoe.plan_shards(experts, config, tp_size, ep_size)
        self._set_up(config, plan, _qmoe.shard_experts(experts, plan, rank), group, rank, backend,
                     device, max_tokens)

    @classmethod
    def from_checkpoint(cls, path, layer=None, *, tp_size=1, ep_size=1, group=None,
                        backend="auto", device=None, max_tokens=None, as_moe_wna16=False):
        """The MoE layer `layer` (default: the first) of a checkpoint directory, reading only this
        rank's experts."""
        group, rank = _group_rank(group, tp_size, ep_size)
        ckpt = path if isinstance(path, Checkpoint) else Checkpoint(os.fspath(path), as_moe_wna16)
        if layer is None:
            layer = ckpt.layers[0]
        config = ckpt.layer_config(layer)
        plan = _qmoe.plan_shards(ckpt.scheme, config, tp_size, ep_size)
        sharded = cls.__new__(cls)
        sharded._set_up(config, plan, _qmoe.load_shard(ckpt, layer, plan, rank), group, rank,
                        backend, device, max_tokens)
        return sharded

    @classmethod
    def from_tensors(cls, config, scheme, w13, w2, **kwargs):
        """From the whole layer's canonical tensors (dicts as for qmoe.MoE.from_tensors)."""
        experts = _qmoe.QuantizedExperts(_qmoe.QuantizedWeight(scheme, **w13),
                                         _qmoe.QuantizedWeight(scheme, **w2))
        return cls(config, experts, **kwargs)

    def _set_up(self, config, plan, rank_experts, group, rank, backend, device, max_tokens):
        self.config = config
        self.plan = plan
        self.group = group
        self.rank = rank
        self.local = MoE(_qmoe.shard_config(config, plan, rank), rank_experts, backend=backend,
                         device=_device_for(group, device), max_tokens=max_tokens)

    op_id = property(_torch_op.op_id)

    def __call__(self, x, router_logits):
        return self.forward(x, router_logits)

    def forward(self, x, router_logits):
        """Tokens replicated on every rank: x [M, H] and router_logits [M, E] (all E experts of
        the layer), the same on every rank; returns the whole layer's out [M, H] on every rank
        (an all-reduce of the ranks' partial outputs)."""
        return torch.ops.qmoe.sharded_moe_forward(self.op_id, x, router_logits)

    def forward_token_split(self, x, router_logits):
        """Tokens split over the ranks: each rank passes its own n tokens (the same n on every
        rank) and gets their rows of the layer's output (all-gather of tokens and logits, every
        rank's experts on all of them, reduce-scatter of the partial outputs)."""
        return torch.ops.qmoe.sharded_moe_forward_token_split(self.op_id, x, router_logits)

    def _forward(self, x, router_logits):
        out = self._partial_forward(x, router_logits)
        dist.all_reduce(out, group=self.group)
        return out

    def _forward_token_split(self, x, router_logits):
        all_logits = self._all_gather(_float32(router_logits))
        partial = self._partial_forward(self._all_gather(x), all_logits)
        out = torch.empty_like(x)
        # Gloo runs this as an all-reduce and keeps this rank's rows (torch >= 2.2).
        dist.reduce_scatter_tensor(out, partial, group=self.group)
        return out

    def _all_gather(self, t):
        gathered = t.new_empty((self.plan.world_size * t.shape[0], *t.shape[1:]))
        dist.all_gather_into_tensor(gathered, t, group=self.group)
        return gathered

    def _partial_forward(self, x, router_logits):
        """This rank's share of the layer's output for every token of x: its experts on its
        channels, weighted by the whole layer's routing (zero for other ranks' experts)."""
        weights, ids = self._local_routing(router_logits)
        return self.local.forward_routed(x, weights.to(x.device), ids.to(x.device))

    def _local_routing(self, router_logits):
        logits = _float32(router_logits).detach().to("cpu").contiguous()
        shape = (logits.shape[0], self.config.top_k)
        weights = torch.empty(shape, dtype=torch.float32)
        ids = torch.empty(shape, dtype=torch.int32)
        _qmoe.route_topk(self.config, logits.numpy(), weights.numpy(), ids.numpy())
        _qmoe.localize_routing(self.plan, self.rank, weights.numpy(), ids.numpy())
        return weights, ids

    def __repr__(self) -> str:
        return (f"ShardedMoE(rank {self.rank} of {self.plan!r}, backend={self.local.backend!r}, "
                f"device={self.local.device!r})")


def _float32(t):
    return t if t.dtype == torch.float32 else t.float()


def _group_rank(group, tp_size, ep_size):
    """The group (None: the default one) and this process's rank in it, checked against the plan's
    size."""
    if dist is None or not dist.is_available():
        raise _qmoe.Error("qmoe.distributed needs torch with torch.distributed")
    if group is None:
        if not dist.is_initialized():
            raise _qmoe.Error("qmoe.distributed: no process group; call "
                              "torch.distributed.init_process_group first or pass group=")
        group = dist.group.WORLD
    size = dist.get_world_size(group)
    if size != tp_size * ep_size:
        raise _qmoe.Error(f"qmoe.distributed: the process group has {size} ranks but tp_size "
                          f"{tp_size} x ep_size {ep_size} needs {tp_size * ep_size}")
    return group, dist.get_rank(group)


def _device_for(group, device):
    """The rank's device: as given, else this process's current GPU for NCCL and the CPU for
    other backends."""
    nccl = dist.get_backend(group) == "nccl"
    if device is None:
        return f"cuda:{torch.cuda.current_device()}" if nccl else "cpu"
    if nccl and not str(device).startswith("cuda"):
        raise _qmoe.Error(f"qmoe.distributed: an NCCL group sums CUDA tensors, but device is "
                          f"{device!r}; pass device='cuda:N' or use a Gloo group for CPU ranks")
    return device


def _register_ops():
    @torch.library.custom_op("qmoe::sharded_moe_forward", mutates_args=())
    def sharded_moe_forward(layer: int, x: torch.Tensor,
                            router_logits: torch.Tensor) -> torch.Tensor:
        return _torch_op._layers[layer]._forward(x.contiguous(), router_logits.contiguous())

    @sharded_moe_forward.register_fake
    def _(layer, x, router_logits):
        return torch.empty(x.shape, dtype=x.dtype, device=x.device)

    @torch.library.custom_op("qmoe::sharded_moe_forward_token_split", mutates_args=())
    def sharded_moe_forward_token_split(layer: int, x: torch.Tensor,
                                        router_logits: torch.Tensor) -> torch.Tensor:
        return _torch_op._layers[layer]._forward_token_split(x.contiguous(),
                                                           router_logits.contiguous())

    @sharded_moe_forward_token_split.register_fake
    def _(layer, x, router_logits):
        return torch.empty(x.shape, dtype=x.dtype, device=x.device)


if torch is not None:
    _register_ops()
