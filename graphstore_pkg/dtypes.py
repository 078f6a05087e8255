"""The dtypes graphstore stores and moves, and their numpy / torch / wire forms.

One table, used by the partition files, the wire codec, the server storage and the client.
numpy has no bfloat16, so a bfloat16 array is held in numpy as its uint16 bit pattern
(``storage_dtype``) while the real dtype travels beside it by name.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class DTypeInfo:
    """One supported dtype.

    Attributes:
        name: canonical name, as written in partition configs and shown to users.
        storage: the numpy dtype that holds the bytes (uint16 for bfloat16).
        wire: the ``graphstore.DType`` enum number in ``graphstore.proto``.
        is_float: whether the dtype is a floating-point type.
    """

    name: str
    storage: np.dtype
    wire: int
    is_float: bool


_TABLE = [
    DTypeInfo("float32", np.dtype("<f4"), 1, True),
    DTypeInfo("float16", np.dtype("<f2"), 2, True),
    DTypeInfo("bfloat16", np.dtype("<u2"), 3, True),
    DTypeInfo("float64", np.dtype("<f8"), 4, True),
    DTypeInfo("int32", np.dtype("<i4"), 5, False),
    DTypeInfo("int64", np.dtype("<i8"), 6, False),
    DTypeInfo("uint8", np.dtype("u1"), 7, False),
    DTypeInfo("bool", np.dtype("?"), 8, False),
    DTypeInfo("int8", np.dtype("i1"), 9, False),
    DTypeInfo("int16", np.dtype("<i2"), 10, False),
]
BY_NAME = {d.name: d for d in _TABLE}
BY_WIRE = {d.wire: d for d in _TABLE}
_BY_STORAGE = {d.storage: d for d in _TABLE if d.name != "bfloat16"}


def info(name: str) -> DTypeInfo:
    """Look up a dtype by its canonical name.

    Raises:
        ValueError: if ``name`` is not a supported dtype.
    """
    try:
        return BY_NAME[name]
    except KeyError:
        raise ValueError(f"unsupported dtype {name!r}; supported: {sorted(BY_NAME)}") from None


def name_of(dtype) -> str:
    """Canonical name of a numpy dtype, a torch dtype, or a name string.

    Raises:
        ValueError: for a dtype graphstore does not store.
    """
    if isinstance(dtype, str):
        return info(dtype.replace("torch.", "")).name
    mod = type(dtype).__module__
    if mod.startswith("torch"):
        return info(str(dtype).replace("torch.", "")).name
    np_dtype = np.dtype(dtype).newbyteorder("<") if np.dtype(dtype).itemsize > 1 else np.dtype(dtype)
    try:
        return _BY_STORAGE[np_dtype].name
    except KeyError:
        raise ValueError(f"unsupported dtype {dtype!r}; supported: {sorted(BY_NAME)}") from None


def torch_dtype(name: str):
    """The torch dtype for a canonical name."""
    import torch

    return getattr(torch, info(name).name)


def to_torch(array: np.ndarray, name: str):
    """Wrap a numpy storage array as a torch tensor of dtype ``name`` (bfloat16 reinterpreted), no copy
    when the array is writable."""
    import torch

    if not array.flags.writeable:
        array = array.copy()
    array = np.ascontiguousarray(array)
    if name == "bfloat16" and array.dtype == np.uint16:
        array = array.view(np.int16)  # the same bits; torch < 2.3 cannot wrap uint16
    t = torch.from_numpy(array)
    if name == "bfloat16":
        return t.view(torch.int16).view(torch.bfloat16) if t.dtype != torch.bfloat16 else t
    return t


def from_torch(tensor) -> tuple[np.ndarray, str]:
    """A CPU torch tensor as (numpy storage array, canonical dtype name), no copy where possible."""
    import torch

    tensor = tensor.detach()
    if tensor.device.type != "cpu":
        tensor = tensor.cpu()
    tensor = tensor.contiguous()
    name = name_of(tensor.dtype)
    if tensor.dtype == torch.bfloat16:
        return tensor.view(torch.int16).numpy().view(np.uint16), name
    return tensor.numpy(), name


def bfloat16_bits_to_float32(bits: np.ndarray) -> np.ndarray:
    """Widen bfloat16 bit patterns (uint16) to float32 exactly."""
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


def float32_to_bfloat16_bits(values: np.ndarray) -> np.ndarray:
    """bfloat16 bit patterns (uint16) of float values, rounded to nearest even like ``torch.bfloat16``.

    NaNs stay (quiet) NaNs; infinities and overflow become infinities.
    """
    bits = np.ascontiguousarray(values, dtype=np.float32).view(np.uint32)
    rounding = ((bits >> np.uint32(16)) & np.uint32(1)) + np.uint32(0x7FFF)
    out = ((bits + rounding) >> np.uint32(16)).astype(np.uint16)
    nan = np.isnan(bits.view(np.float32))
    if nan.any():
        out[nan] = ((bits[nan] >> np.uint32(16)) | np.uint32(0x0040)).astype(np.uint16)
    return out
