"""``dgl.backend``: DGL's framework-neutral tensor functions, here always over PyTorch
(``backend_name == "pytorch"``).

DGL scripts and test helpers call them as ``F.tensor``, ``F.gather_row``, ``F.asnumpy``, ... (``import
dgl.backend as F``); each is a thin, documented torch expression. Data types are torch's
(``F.int64 is torch.int64``); a context is a ``torch.device``.
"""

from __future__ import annotations

import builtins

import numpy as np
import torch

backend_name = "pytorch"

bool = torch.bool  # noqa: A001 - DGL's name
int8, int16, int32, int64 = torch.int8, torch.int16, torch.int32, torch.int64
uint8 = torch.uint8
float16, bfloat16, float32, float64 = torch.float16, torch.bfloat16, torch.float32, torch.float64
data_type_dict = {
    "bool": bool,
    "int8": int8,
    "int16": int16,
    "int32": int32,
    "int64": int64,
    "uint8": uint8,
    "float16": float16,
    "bfloat16": bfloat16,
    "float32": float32,
    "float64": float64,
}
no_grad = torch.no_grad


class record_grad:  # noqa: N801 - DGL's name
    """DGL's autograd recording scope; PyTorch records by default, so it does nothing."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


# -- devices -----------------------------------------------------------------------------------------
def cpu() -> torch.device:
    """The CPU device."""
    return torch.device("cpu")


def cuda() -> torch.device:
    """The first GPU."""
    return torch.device("cuda:0")


def context(t: torch.Tensor) -> torch.device:
    """The device of a tensor."""
    return t.device


def device_type(ctx) -> str:
    """``'cpu'`` or ``'cuda'``."""
    return torch.device(ctx).type


def device_id(ctx) -> int:
    """The device index (0 for the CPU)."""
    ctx = torch.device(ctx)
    return 0 if ctx.index is None else ctx.index


def to_backend_ctx(ctx) -> torch.device:
    """A device of a DGL context or a device name."""
    return torch.device(ctx)


def copy_to(t: torch.Tensor, ctx, **kwargs) -> torch.Tensor:
    """The tensor on ``ctx``."""
    return t.to(torch.device(ctx), **kwargs)


def is_pinned(t: torch.Tensor) -> builtins.bool:
    """Whether a tensor is in pinned host memory."""
    return t.is_pinned()


# -- creation ------------------------------------------------------------------------------------------
def tensor(data, dtype=None) -> torch.Tensor:
    """A tensor of ``data`` (a scalar becomes a 1-element tensor, as DGL's)."""
    if isinstance(data, torch.Tensor):
        return data if dtype is None else data.to(dtype)
    if isinstance(data, np.ndarray):
        out = torch.from_numpy(np.ascontiguousarray(data))
        return out if dtype is None else out.to(dtype)
    if isinstance(data, (int, float, np.integer, np.floating)):
        data = [data]
    return torch.tensor(data, dtype=dtype)


def as_scalar(data):
    """The Python number of a one-element tensor."""
    return data.item()


def is_tensor(obj) -> builtins.bool:
    """Whether ``obj`` is a torch tensor."""
    return isinstance(obj, torch.Tensor)


def zeros(shape, dtype=float32, ctx=None) -> torch.Tensor:
    """Zeros."""
    return torch.zeros(shape, dtype=dtype, device=ctx)


def zeros_like(t: torch.Tensor) -> torch.Tensor:
    """Zeros shaped as ``t``."""
    return torch.zeros_like(t)


def ones(shape, dtype=float32, ctx=None) -> torch.Tensor:
    """Ones."""
    return torch.ones(shape, dtype=dtype, device=ctx)


def full_1d(length, fill_value, dtype, ctx=None) -> torch.Tensor:
    """A 1-D tensor of one value."""
    return torch.full((length,), fill_value, dtype=dtype, device=ctx)


def arange(start, stop, dtype=int64, ctx=None) -> torch.Tensor:
    """``[start, stop)``."""
    return torch.arange(start, stop, dtype=dtype, device=ctx)


def empty(shape, dtype=float32, ctx=None) -> torch.Tensor:
    """An uninitialised tensor."""
    return torch.empty(shape, dtype=dtype, device=ctx)


def uniform(shape, dtype, ctx, low, high) -> torch.Tensor:
    """Uniform random values in ``[low, high)``."""
    return torch.empty(shape, dtype=dtype, device=ctx).uniform_(low, high)


def randint(shape, dtype, ctx, low, high) -> torch.Tensor:
    """Random integers in ``[low, high)``."""
    return torch.randint(low, high, shape, dtype=dtype, device=ctx)


def randn(shape) -> torch.Tensor:
    """Standard normal values."""
    return torch.randn(*shape)


def rand_shuffle(arr: torch.Tensor) -> torch.Tensor:
    """The rows in random order."""
    return arr[torch.randperm(len(arr), device=arr.device)]


def seed(value: int) -> None:
    """Seed torch's and NumPy's generators."""
    torch.manual_seed(value)
    np.random.seed(value)


# -- inspection ----------------------------------------------------------------------------------------
def shape(t: torch.Tensor) -> tuple:
    """The shape."""
    return tuple(t.shape)


def dtype(t: torch.Tensor) -> torch.dtype:
    """The dtype."""
    return t.dtype


def ndim(t: torch.Tensor) -> int:
    """The number of dimensions."""
    return t.dim()


def astype(t: torch.Tensor, ty: torch.dtype) -> torch.Tensor:
    """The tensor in another dtype."""
    return t.type(ty)


def asnumpy(t) -> np.ndarray:
    """A NumPy array (a copy off the GPU, detached)."""
    if isinstance(t, torch.Tensor):
        return t.detach().cpu().numpy()
    return np.asarray(t)


def zerocopy_to_numpy(t: torch.Tensor) -> np.ndarray:
    """The NumPy view of a CPU tensor."""
    return t.numpy()


def zerocopy_from_numpy(arr: np.ndarray) -> torch.Tensor:
    """The tensor view of a NumPy array."""
    return torch.from_numpy(arr)


def clone(t: torch.Tensor) -> torch.Tensor:
    """A copy."""
    return t.clone()


# -- reductions and arithmetic ---------------------------------------------------------------------------
def sum(x: torch.Tensor, dim, keepdims=False):  # noqa: A001 - DGL's name
    """Sum over ``dim``."""
    return x.sum(dim, keepdim=keepdims)


def reduce_sum(x: torch.Tensor):
    """Sum of every element."""
    return x.sum()


def mean(x: torch.Tensor, dim):
    """Mean over ``dim``."""
    return x.mean(dim)


def max(x: torch.Tensor, dim):  # noqa: A001
    """Maximum over ``dim``."""
    return x.max(dim)[0]


def min(x: torch.Tensor, dim):  # noqa: A001
    """Minimum over ``dim``."""
    return x.min(dim)[0]


def cumsum(x: torch.Tensor, dim):
    """Cumulative sum over ``dim``."""
    return torch.cumsum(x, dim)


def floor_div(a, b):
    """Floor division."""
    return torch.div(a, b, rounding_mode="floor")


def argsort(x: torch.Tensor, dim, descending):
    """Indices sorting ``x`` along ``dim``."""
    return torch.argsort(x, dim=dim, descending=descending)


def sort_1d(x: torch.Tensor):
    """``(sorted values, their indices)`` of a 1-D tensor."""
    return torch.sort(x)


def topk(x: torch.Tensor, k, dim, descending=True):
    """The ``k`` largest (or smallest) values along ``dim``."""
    return torch.topk(x, k, dim, largest=descending)[0]


def argmax(x: torch.Tensor, dim):
    """Index of the maximum along ``dim``."""
    return torch.argmax(x, dim)


def argmin(x: torch.Tensor, dim):
    """Index of the minimum along ``dim``."""
    return torch.argmin(x, dim)


def exp(x):
    """Elementwise exponential."""
    return torch.exp(x)


def sqrt(x):
    """Elementwise square root."""
    return torch.sqrt(x)


def softmax(x, dim):
    """Softmax along ``dim``."""
    return torch.softmax(x, dim)


def clamp(x, low, high):
    """Values clipped to ``[low, high]``."""
    return torch.clamp(x, low, high)


def equal(a, b):
    """Elementwise equality."""
    return a == b


def allclose(a, b, rtol=1e-4, atol=1e-4) -> builtins.bool:
    """Whether two tensors are close (compared as float32 on the CPU)."""
    return torch.allclose(a.float().cpu(), b.float().cpu(), rtol=rtol, atol=atol)


def array_equal(a, b) -> builtins.bool:
    """Whether two tensors are exactly equal (shape and values)."""
    return torch.equal(a.cpu(), b.cpu())


def logical_not(x):
    """Elementwise not."""
    return ~x


def logical_and(a, b):
    """Elementwise and."""
    return a & b


def logical_or(a, b):
    """Elementwise or."""
    return a | b


def count_nonzero(x) -> int:
    """Number of non-zero elements."""
    return int(torch.count_nonzero(x))


# -- shaping and indexing ---------------------------------------------------------------------------------
def cat(seq, dim):
    """Concatenation along ``dim``."""
    return torch.cat(list(seq), dim=dim)


def stack(seq, dim):
    """Stacking along a new ``dim``."""
    return torch.stack(list(seq), dim=dim)


def split(x, sizes_or_sections, dim):
    """Pieces of ``x`` along ``dim``."""
    return torch.split(x, sizes_or_sections, dim)


def repeat(x, repeats, dim):
    """Each slice repeated ``repeats`` times along ``dim``."""
    return torch.repeat_interleave(x, repeats, dim)


def reshape(x, new_shape):
    """Reshaped."""
    return x.reshape(new_shape)


def squeeze(x, dim):
    """Without the unit dimension ``dim``."""
    return x.squeeze(dim)


def unsqueeze(x, dim):
    """With a unit dimension at ``dim``."""
    return x.unsqueeze(dim)


def swapaxes(x, axis1, axis2):
    """Two dimensions swapped."""
    return x.transpose(axis1, axis2)


def gather_row(data: torch.Tensor, row_index) -> torch.Tensor:
    """Rows of ``data`` at ``row_index``."""
    return torch.index_select(data, 0, torch.as_tensor(row_index, device=data.device).long())


def slice_axis(data, axis, begin, end):
    """The slice ``[begin, end)`` along ``axis``."""
    return torch.narrow(data, axis, begin, end - begin)


def take(data, indices, dim):
    """Elements at ``indices`` along ``dim``."""
    return torch.index_select(data, dim, indices.reshape(-1)).reshape(
        *data.shape[:dim], *indices.shape, *data.shape[dim + 1 :]
    )


def narrow_row(x, start, stop):
    """Rows ``[start, stop)``."""
    return x[start:stop]


def scatter_row(data, row_index, value):
    """A copy of ``data`` with the rows at ``row_index`` set to ``value``."""
    return data.index_copy(0, row_index.long(), value)


def scatter_row_inplace(data, row_index, value) -> None:
    """Set the rows at ``row_index`` to ``value`` in place."""
    data[row_index.long()] = value


def index_add_inplace(data, row_idx, value) -> None:
    """Add ``value`` to the rows at ``row_idx`` in place."""
    data.index_add_(0, row_idx, value)


def boolean_mask(data, mask):
    """Rows where ``mask`` holds."""
    return data[mask.bool()]


def nonzero_1d(x) -> torch.Tensor:
    """Positions of the non-zero elements of a 1-D tensor."""
    return torch.nonzero(x, as_tuple=False).reshape(-1)


def unique(x, return_inverse=False, return_counts=False):
    """Sorted distinct values (with the inverse map and counts on request)."""
    return torch.unique(x, return_inverse=return_inverse, return_counts=return_counts)


def replace_inf_with_zero(x):
    """Infinite values replaced by 0."""
    return torch.masked_fill(x, torch.isinf(x), 0)


# -- autograd -----------------------------------------------------------------------------------------------
def attach_grad(x: torch.Tensor) -> torch.Tensor:
    """``x`` recording its gradient."""
    if x.grad is not None:
        x.grad.zero_()
        return x
    return x.requires_grad_()


def backward(x: torch.Tensor, head_gradient=None) -> None:
    """Backpropagate from ``x``."""
    if head_gradient is not None and head_gradient.shape[0] == 1 and len(head_gradient.shape) == 1:
        head_gradient = head_gradient.reshape(())
    x.backward(head_gradient)


def grad(x: torch.Tensor):
    """The gradient of ``x``."""
    return x.grad


def is_no_grad(x: torch.Tensor) -> builtins.bool:
    """Whether ``x`` has no gradient."""
    return x.grad is None or builtins.bool((x.grad == 0).all())


def is_recording() -> builtins.bool:
    """Whether autograd records."""
    return torch.is_grad_enabled()


def sync() -> None:
    """Wait for the GPU (nothing on the CPU)."""
    if torch.cuda.is_available():
        torch.cuda.synchronize()


__all__ = sorted(
    name
    for name, value in dict(globals()).items()
    if not name.startswith("_") and name not in ("annotations", "builtins", "np", "torch")
)
