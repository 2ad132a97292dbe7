"""qmoe: weight-only quantized Mixture-of-Experts layers (int4/int8 with group scales, zero
points, act-order, bias; MXFP4, and MXFP4 activations emulated) from checkpoints or tensors, run
on the CPU or a CUDA GPU with NumPy or PyTorch tensors, without copies.

    import qmoe
    moe = qmoe.MoE.from_checkpoint("tests/data/awq-int4-g32-bias", layer=0)
    out = moe(x, router_logits)        # x [M, H], router_logits [M, E]
"""
from ._qmoe import (
    Activation,
    ActivationQuant,
    DType,
    Error,
    MoEConfig,
    QuantizedExperts,
    QuantizedWeight,
    QuantScheme,
    RoutingConfig,
    Scoring,
    Selection,
    Verdict,
    WeightKind,
    built_with_cuda,
    cpu_threads,
    experts_from_layout,
    known_backends,
    random_experts,
    set_cpu_threads,
    usable_cpus,
)
from ._checkpoint import Checkpoint
from ._moe import MoE, explain
from . import _torch_op
from . import distributed

__all__ = [
    "Activation",
    "ActivationQuant",
    "Checkpoint",
    "DType",
    "Error",
    "MoE",
    "MoEConfig",
    "QuantizedExperts",
    "QuantizedWeight",
    "QuantScheme",
    "RoutingConfig",
    "Scoring",
    "Selection",
    "Verdict",
    "WeightKind",
    "built_with_cuda",
    "cpu_threads",
    "cuda_built",
    "distributed",
    "experts_from_layout",
    "explain",
    "known_backends",
    "random_experts",
    "set_cpu_threads",
    "usable_cpus",
]

cuda_built = built_with_cuda()  # whether the CUDA backends are in this build

_torch_op.register()
