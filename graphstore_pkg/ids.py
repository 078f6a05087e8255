"""Node and edge IDs as every layer takes them: normalisation to int64 arrays and range checks.

One home for the two checks that every entry point makes (the partition book, the client's
indexing, sampling and blocks, the remote transport and the server's storage): an input of IDs
becomes a 1-D int64 numpy array, and an ID outside its range is reported by value. All functions
are vectorised and side-effect free.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from graphstore.errors import IdTypeError


def to_numpy(ids: Any) -> np.ndarray:
    """A numpy view (no copy where possible) of IDs given as a torch tensor, numpy array, sequence,
    range or scalar. Tensors on another device are copied to the host.

    Raises:
        IdTypeError: a float or complex tensor that is not empty.
    """
    if isinstance(ids, np.ndarray):
        return ids
    if type(ids).__module__.startswith("torch"):
        tensor = ids.detach()
        if tensor.device.type != "cpu":
            tensor = tensor.cpu()
        if tensor.dtype.is_floating_point or tensor.dtype.is_complex:
            if tensor.numel() == 0:  # torch.tensor([]) is float32: an empty index all the same
                return np.empty(0, dtype=np.int64)
            raise IdTypeError(f"IDs must be integers, got a tensor of dtype {tensor.dtype}")
        return tensor.numpy()
    if isinstance(ids, range):
        return np.arange(ids.start, ids.stop, ids.step, dtype=np.int64)
    if isinstance(ids, (list, tuple)) and len(ids) == 0:
        return np.empty(0, dtype=np.int64)
    return np.asarray(ids)


def as_id_array(ids: Any, name: str = "ids", *, one_dim: bool = False) -> np.ndarray:
    """IDs (torch tensor, numpy array, sequence, range or scalar) as a 1-D int64 numpy array, sharing
    memory with a CPU int64 input where possible.

    Args:
        ids: the IDs.
        name: the argument's name, for error messages.
        one_dim: refuse inputs of more than one dimension instead of flattening them.

    Returns:
        A 1-D int64 array.

    Raises:
        IdTypeError: IDs that are not integers (booleans included); it is both a TypeError and a
            ValueError, so the client API (TypeError, as DGL) and the partition interface
            (ValueError, INVALID_ARGUMENT on the wire) each catch it as their own.
        ValueError: more than one dimension with ``one_dim=True``.
    """
    try:
        array = to_numpy(ids)
    except IdTypeError as exc:
        raise IdTypeError(f"{name}: {exc}") from None
    if array.ndim != 1:
        if one_dim and array.ndim > 1:
            raise ValueError(f"{name}: expected a 1-d array of IDs, got shape {list(array.shape)}")
        array = array.reshape(-1)
    if array.dtype == np.int64:
        return array
    if array.size == 0:
        return np.empty(0, dtype=np.int64)
    if array.dtype.kind not in "iu":
        raise IdTypeError(f"{name}: IDs must be integers, got dtype {array.dtype}")
    return array.astype(np.int64)


def first_outside(ids: np.ndarray, lower: int, upper: int) -> int | None:
    """The first ID (in array order) outside ``[lower, upper)``, or None when all are inside."""
    if ids.size == 0:
        return None
    lo, hi = ids.min(), ids.max()
    if lo >= lower and hi < upper:
        return None
    return int(ids[(ids < lower) | (ids >= upper)][0])


def check_id_range(ids: np.ndarray, upper: int, name: str = "ids", lower: int = 0) -> None:
    """Raise IndexError naming the first ID of ``ids`` outside ``[lower, upper)``.

    Args:
        ids: int64 IDs.
        upper: one past the largest valid ID (the number of nodes or edges for global IDs).
        name: what to call the IDs in the message.
        lower: the smallest valid ID.

    Raises:
        IndexError: when an ID is out of range; the message gives the ID and the valid range.
    """
    bad = first_outside(ids, lower, upper)
    if bad is not None:
        raise IndexError(f"{name} contains ID {bad}, outside the valid range [{lower}, {upper})")
