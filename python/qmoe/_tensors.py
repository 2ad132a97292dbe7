"""How the arrays handed to a MoE reach the C++ core without a copy.

torch tensors are described by their own attributes (pointer, dtype, shape, strides, device):
torch's DLPack export would synchronise the legacy default stream with the current one, which
breaks CUDA graph capture and costs an event per call. Anything else goes through DLPack.
"""
import sys

from . import _qmoe

_DTYPE_CODES = {}  # torch dtype -> qmoe.DType code


def torch_module():
    """torch if the process has imported it (qmoe never imports it for NumPy users)."""
    return sys.modules.get("torch")


def is_torch(t) -> bool:
    torch = torch_module()
    return torch is not None and isinstance(t, torch.Tensor)


def _torch_dtype_code(dtype) -> int:
    if not _DTYPE_CODES:
        torch = torch_module()
        for t, d in (
            (torch.float32, _qmoe.DType.f32),
            (torch.float16, _qmoe.DType.f16),
            (torch.bfloat16, _qmoe.DType.bf16),
            (torch.float64, _qmoe.DType.f64),
            (torch.int32, _qmoe.DType.i32),
            (torch.int64, _qmoe.DType.i64),
            (torch.uint8, _qmoe.DType.u8),
        ):
            _DTYPE_CODES[t] = int(d.value)
    try:
        return _DTYPE_CODES[dtype]
    except KeyError:
        raise _qmoe.Error(f"torch dtype {dtype} is not supported by qmoe") from None


def describe(t, what: str, dims: int = 2) -> tuple:
    """The tuple the core's *_described methods take, for a torch tensor: (data_ptr, dtype code,
    shape..., strides..., device), 7 items at 2 dimensions."""
    if t.dim() != dims:
        raise _qmoe.Error(f"{what} must have {dims} dimensions, got shape {tuple(t.shape)}")
    return (t.data_ptr(), _torch_dtype_code(t.dtype), *t.shape, *t.stride(), t.get_device())


def current_stream(t) -> int:
    """torch's current CUDA stream on t's device (0 for CPU tensors)."""
    if not t.is_cuda:
        return 0
    return torch_module()._C._cuda_getCurrentRawStream(t.get_device())


def as_float32(t):
    """Router logits and weights in float32 (engines hand over bf16 logits): a small copy."""
    if is_torch(t):
        torch = torch_module()
        return t if t.dtype == torch.float32 else t.float()
    import numpy as np

    if isinstance(t, np.ndarray):
        return t if t.dtype == np.float32 else t.astype(np.float32)
    return t


def as_int32(t):
    """Expert ids in int32 (torch.topk gives int64): a small copy."""
    if is_torch(t):
        torch = torch_module()
        return t if t.dtype == torch.int32 else t.to(torch.int32)
    import numpy as np

    if isinstance(t, np.ndarray):
        return t if t.dtype == np.int32 else t.astype(np.int32)
    return t


def empty_like(x):
    """A new contiguous output of x's shape, dtype and device."""
    if is_torch(x):
        return torch_module().empty(x.shape, dtype=x.dtype, device=x.device)
    import numpy as np

    if isinstance(x, np.ndarray):
        return np.empty(x.shape, dtype=x.dtype)
    raise _qmoe.Error(f"pass out= for arrays of type {type(x).__name__}")
