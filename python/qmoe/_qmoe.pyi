from collections.abc import Mapping, Sequence
import enum
import os
import pathlib
from typing import Annotated, overload

from numpy.typing import NDArray


class Error(ValueError):
    pass

def built_with_cuda() -> bool: ...

def usable_cpus() -> int:
    """
    The cores this process may run on: its CPU affinity mask, bounded by its cgroup CPU quota rounded up.
    """

def cpu_threads() -> int:
    """
    Threads the cpu backend runs forwards on: QMOE_CPU_THREADS when set, else usable_cpus(). One pool per process, shared by every layer and calling thread.
    """

def set_cpu_threads(threads: int) -> None:
    """Sets the cpu backend's thread count (1..1024) for every later forward."""

class DType(enum.Enum):
    f64 = 0

    f32 = 1

    f16 = 2

    bf16 = 3

    i64 = 4

    i32 = 5

    i16 = 6

    i8 = 7

    u8 = 8

    u16 = 9

    u32 = 10

class Activation(enum.Enum):
    silu = 0

    gelu = 1

    gelu_tanh = 2

    swigluoai = 3

    swigluoai_uninterleave = 4

    silu_no_mul = 5

    gelu_no_mul = 6

    gelu_tanh_no_mul = 7

    relu2_no_mul = 8

class Scoring(enum.Enum):
    softmax = 0

    sigmoid = 1

class WeightKind(enum.Enum):
    integer = 0

    mxfp4 = 1

class ActivationQuant(enum.Enum):
    """
    Activations entering each GEMM: kept (none), or quantized to MXFP4 with OCP floor scales (mxfp4) or Quark's even scales (mxfp4_even).
    """

    none = 0

    mxfp4 = 1

    mxfp4_even = 2

class QuantScheme:
    """How expert weights are quantized; group_size -1 = channelwise."""

    def __init__(self, bits: int = 4, group_size: int = 128, zero_points: bool = False, act_order: bool = False, kind: WeightKind = WeightKind.integer, activation_quant: ActivationQuant = ActivationQuant.none) -> None: ...

    @property
    def kind(self) -> WeightKind: ...

    @kind.setter
    def kind(self, arg: WeightKind, /) -> None: ...

    @property
    def activation_quant(self) -> ActivationQuant: ...

    @activation_quant.setter
    def activation_quant(self, arg: ActivationQuant, /) -> None: ...

    @property
    def bits(self) -> int: ...

    @bits.setter
    def bits(self, arg: int, /) -> None: ...

    @property
    def group_size(self) -> int: ...

    @group_size.setter
    def group_size(self, arg: int, /) -> None: ...

    @property
    def act_order(self) -> bool: ...

    @act_order.setter
    def act_order(self, arg: bool, /) -> None: ...

    @property
    def zero_points(self) -> bool: ...

    @zero_points.setter
    def zero_points(self, arg: bool, /) -> None: ...

    def __eq__(self, arg: QuantScheme, /) -> bool: ...

    def __repr__(self) -> str: ...

    def __str__(self) -> str: ...

class RoutingConfig:
    def __init__(self) -> None: ...

    @property
    def scoring(self) -> Scoring: ...

    @scoring.setter
    def scoring(self, arg: Scoring, /) -> None: ...

    @property
    def top_k(self) -> int: ...

    @top_k.setter
    def top_k(self, arg: int, /) -> None: ...

    @property
    def renormalize(self) -> bool: ...

    @renormalize.setter
    def renormalize(self, arg: bool, /) -> None: ...

    @property
    def routed_scaling_factor(self) -> float: ...

    @routed_scaling_factor.setter
    def routed_scaling_factor(self, arg: float, /) -> None: ...

    @property
    def n_group(self) -> int: ...

    @n_group.setter
    def n_group(self, arg: int, /) -> None: ...

    @property
    def topk_group(self) -> int: ...

    @topk_group.setter
    def topk_group(self, arg: int, /) -> None: ...

    @property
    def correction_bias(self) -> list[float]: ...

    @correction_bias.setter
    def correction_bias(self, arg: Sequence[float], /) -> None: ...

class MoEConfig:
    """One MoE layer's shape, routing and activation."""

    def __init__(self, num_experts: int, hidden: int, intermediate: int, top_k: int, activation: Activation = Activation.silu, renormalize: bool = True, scoring: Scoring = Scoring.softmax) -> None: ...

    @property
    def num_experts(self) -> int: ...

    @num_experts.setter
    def num_experts(self, arg: int, /) -> None: ...

    @property
    def hidden(self) -> int: ...

    @hidden.setter
    def hidden(self, arg: int, /) -> None: ...

    @property
    def intermediate(self) -> int: ...

    @intermediate.setter
    def intermediate(self, arg: int, /) -> None: ...

    @property
    def routing(self) -> RoutingConfig: ...

    @routing.setter
    def routing(self, arg: RoutingConfig, /) -> None: ...

    @property
    def activation(self) -> Activation: ...

    @activation.setter
    def activation(self, arg: Activation, /) -> None: ...

    @property
    def w13_bias(self) -> bool: ...

    @w13_bias.setter
    def w13_bias(self, arg: bool, /) -> None: ...

    @property
    def w2_bias(self) -> bool: ...

    @w2_bias.setter
    def w2_bias(self, arg: bool, /) -> None: ...

    @property
    def apply_router_weight_on_input(self) -> bool: ...

    @apply_router_weight_on_input.setter
    def apply_router_weight_on_input(self, arg: bool, /) -> None: ...

    @property
    def top_k(self) -> int: ...

    def validate(self) -> None: ...

    def __repr__(self) -> str: ...

class Verdict:
    """The oracle's verdict on one backend."""

    @property
    def backend(self) -> str: ...

    @property
    def summary(self) -> str: ...

    @property
    def chosen(self) -> bool: ...

    @property
    def compatible(self) -> bool: ...

    @property
    def reason(self) -> str: ...

    def __repr__(self) -> str: ...

class PlanStep:
    """
    One backend of a two-kernel plan and the batches it runs: from `from_tokens` tokens up to the next step's.
    """

    @property
    def backend(self) -> str: ...

    @property
    def from_tokens(self) -> int: ...

    @property
    def why(self) -> str: ...

    @property
    def weight_bytes(self) -> int:
        """
        What a large-batch step adds to the first step's weights, in bytes; 0 for the first step
        """

    @property
    def shared_bytes(self) -> int:
        """
        The first step's int4 codes this step reads instead of a copy of its own, in bytes
        """

    def __repr__(self) -> str: ...

class Selection:
    """Which backend runs a layer, and every backend's verdict."""

    @property
    def backend(self) -> str: ...

    @property
    def verdicts(self) -> list[Verdict]: ...

    @property
    def plan(self) -> list[PlanStep]:
        """
        On sm_90: the small-batch backend, then the large-batch one from its crossover (per call); empty when one backend runs every batch
        """

    @property
    def error(self) -> str: ...

    @property
    def weight_bytes(self) -> int:
        """
        The chosen backend's prepared copy of the layer's weights, in bytes (0 where it does not declare them)
        """

    @property
    def default_weight_bytes(self) -> int:
        """
        The layer's weight bytes as a MoE prepares them by default: the chosen backend's, plus what the plan's large-batch step adds when that is prepared unasked
        """

    def __repr__(self) -> str: ...

def explain(scheme: QuantScheme, config: MoEConfig, device: str = 'cpu', backend: str = 'auto') -> Selection:
    """
    The oracle's verdicts for a layer of this scheme and config on `device` (a real device such as 'cpu' or 'cuda:0', or a described one such as 'sm_90' or 'h100').
    """

def known_backends() -> list[str]: ...

class QuantizedWeight:
    """One stacked expert weight in qmoe's canonical form, [E, N, K]."""

    def __init__(self, scheme: QuantScheme, codes: Annotated[NDArray, dict(writable=False)], scales: Annotated[NDArray, dict(writable=False)], zeros: Annotated[NDArray, dict(writable=False)] | None = None, g_idx: Annotated[NDArray, dict(writable=False)] | None = None, bias: Annotated[NDArray, dict(writable=False)] | None = None, K_full: int = 0) -> None:
        """
        codes u8 [E, N, K/2] (int4, low nibble = even k) or [E, N, K] (int8); scales f32 [E, N, K/G]; zeros u8 [E, N, K/G]; g_idx i32 [E, K]; bias f32 [E, N]. Copied.
        """

    @property
    def scheme(self) -> QuantScheme: ...

    @property
    def E(self) -> int: ...

    @property
    def N(self) -> int: ...

    @property
    def K(self) -> int: ...

    @property
    def has_bias(self) -> bool: ...

    @property
    def codes(self) -> NDArray: ...

    @property
    def scales(self) -> NDArray: ...

    @property
    def zeros(self) -> NDArray: ...

    @property
    def g_idx(self) -> NDArray: ...

    @property
    def bias(self) -> NDArray: ...

    def dequantize(self) -> NDArray:
        """The weight as float32 [E, N, K]: (code - zero) * scale."""

class QuantizedExperts:
    """
    A layer's experts: w13 [E, 2I, H] (gate rows, then up rows) and w2 [E, H, I].
    """

    def __init__(self, w13: QuantizedWeight, w2: QuantizedWeight) -> None: ...

    @property
    def w13(self) -> QuantizedWeight: ...

    @property
    def w2(self) -> QuantizedWeight: ...

    @property
    def num_experts(self) -> int: ...

    @property
    def hidden(self) -> int: ...

    @property
    def intermediate(self) -> int: ...

def random_experts(config: MoEConfig, scheme: QuantScheme, seed: int = 0) -> QuantizedExperts:
    """
    Random experts for a config: float weights ~ N(0, 1/K) quantized with the reference round-to-nearest quantizer (for examples, tests and benchmarks).
    """

class Checkpoint:
    """A model directory (config.json + safetensors) with quantized experts."""

    def __init__(self, path: str | os.PathLike, as_moe_wna16: bool = False) -> None: ...

    @property
    def path(self) -> pathlib.Path: ...

    @property
    def format(self) -> str: ...

    @property
    def model_type(self) -> str: ...

    @property
    def scheme(self) -> QuantScheme: ...

    @property
    def config(self) -> MoEConfig: ...

    @property
    def layers(self) -> list[int]:
        """Layers that hold quantized experts."""

    def layer_config(self, layer: int) -> MoEConfig: ...

    def layer_bytes(self, layer: int) -> int: ...

    def load_layer(self, layer: int) -> QuantizedExperts:
        """The layer's experts in canonical form."""

class MoE:
    """A MoE layer whose weights live on its device in its backend's form."""

    def __init__(self, config: MoEConfig, experts: QuantizedExperts, backend: str = 'auto', device: str = 'cpu') -> None: ...

    @property
    def config(self) -> MoEConfig: ...

    @property
    def backend(self) -> str: ...

    @property
    def selection(self) -> Selection: ...

    def reserve(self, max_tokens: int, stream: int = 0) -> None: ...

    def forward(self, x: Annotated[NDArray, dict(writable=False)], router_logits: Annotated[NDArray, dict(writable=False)], out: NDArray, stream: int = 0) -> None: ...

    def forward_routed(self, x: Annotated[NDArray, dict(writable=False)], topk_weights: Annotated[NDArray, dict(writable=False)], topk_ids: Annotated[NDArray, dict(writable=False)], out: NDArray, stream: int = 0) -> None: ...

    def forward_described(self, x: tuple, router_logits: tuple, out: tuple, stream: int = 0) -> None: ...

    def forward_routed_described(self, x: tuple, topk_weights: tuple, topk_ids: tuple, out: tuple, stream: int = 0) -> None: ...

    def forward_batched(self, x: Annotated[NDArray, dict(writable=False)], counts: Annotated[NDArray, dict(writable=False)], out: NDArray, stream: int = 0) -> None: ...

    def forward_batched_described(self, x: tuple, counts: tuple, out: tuple, stream: int = 0) -> None: ...

def experts_from_layout(format: str, tensors: Mapping[str, Annotated[NDArray, dict(writable=False)]], config: MoEConfig, scheme: QuantScheme, gptq_version: int = 1) -> QuantizedExperts:
    """
    Experts from a layer's tensors in a checkpoint format's own layout (gptq, awq, compressed-tensors, quark), named '{expert}.{gate_proj|up_proj|down_proj}.{tensor}' as in the format (e.g. '3.gate_proj.qweight', '3.gate_proj.scales', '3.gate_proj.weight_scale'). Read by the checkpoint reader's adapters; the arrays are read, not kept.
    """

class RankShard:
    """One rank's part of a ShardPlan."""

    @property
    def rank(self) -> int: ...

    @property
    def tp_rank(self) -> int: ...

    @property
    def ep_rank(self) -> int: ...

    @property
    def first_expert(self) -> int: ...

    @property
    def num_experts(self) -> int: ...

    @property
    def first_channel(self) -> int: ...

    @property
    def intermediate(self) -> int: ...

    @property
    def w2_bias(self) -> bool:
        """Whether this rank adds w2's bias (tp_rank 0)"""

    def __repr__(self) -> str: ...

class ShardPlan:
    """
    A layer split over tp_size x ep_size ranks; rank = ep_rank * tp_size + tp_rank.
    """

    @property
    def tp_size(self) -> int: ...

    @property
    def ep_size(self) -> int: ...

    @property
    def word_bits(self) -> int: ...

    @property
    def world_size(self) -> int: ...

    @property
    def layer(self) -> str: ...

    @property
    def ranks(self) -> list[RankShard]: ...

    def expert_map(self, rank: int) -> list[int]:
        """
        [E] global expert id -> the rank's local id, -1 where another rank holds it
        """

    def __repr__(self) -> str: ...

@overload
def plan_shards(experts: QuantizedExperts, config: MoEConfig, tp_size: int, ep_size: int, word_bits: int = 32) -> ShardPlan:
    """
    Splits a layer over tp_size x ep_size ranks, or raises Error naming the rule it breaks and the sizes that work. word_bits: the packed word a TP slice must not cut (32: checkpoint words, 8: qmoe's canonical bytes).
    """

@overload
def plan_shards(scheme: QuantScheme, config: MoEConfig, tp_size: int, ep_size: int, word_bits: int = 32) -> ShardPlan: ...

def shard_experts(experts: QuantizedExperts, plan: ShardPlan, rank: int) -> QuantizedExperts:
    """
    The rank's slice of the whole layer's experts, an ordinary layer for any backend.
    """

def shard_config(config: MoEConfig, plan: ShardPlan, rank: int) -> MoEConfig:
    """
    The rank's slice's config: its experts and channels, top-k without grouping (routing is done for the whole layer).
    """

def load_shard(checkpoint: Checkpoint, layer: int, plan: ShardPlan, rank: int) -> QuantizedExperts:
    """
    The rank's slice of a checkpoint's layer, reading only the rank's experts.
    """

def route_topk(config: MoEConfig, router_logits: Annotated[NDArray, dict(writable=False)], topk_weights: NDArray, topk_ids: NDArray) -> None:
    """
    The layer's routing of host router_logits f32 [M, E] into topk_weights f32 [M, k] and topk_ids i32 [M, k] (the reference router every CPU backend uses).
    """

def localize_routing(plan: ShardPlan, rank: int, topk_weights: NDArray, topk_ids: NDArray) -> None:
    """
    In place: the whole layer's host routing becomes the rank's (local ids; id 0 and weight 0 where another rank holds the expert).
    """
