"""Where the co-located graph is held for a loader on a device: copied into the device's memory, or in
pinned (page-locked) host memory that the GPU reads directly (unified virtual addressing, UVA).

With UVA, memory torch pins (``cudaHostAlloc``) lies in the GPU's address space at its host address, so
a CUDA tensor over that address reads host memory from the GPU's kernels over the bus, without a copy of
the whole array on the device: DGL's ``use_uva=True``. :func:`uva_view` builds such a tensor through the
CUDA array interface (the pointer, shape and type; the view keeps the host tensor alive).
"""

from __future__ import annotations

import torch

DEVICE = "device"
PINNED = "pinned"
PLACEMENTS = (DEVICE, PINNED)

_TYPESTR = {
    torch.bool: "|b1",
    torch.uint8: "|u1",
    torch.int8: "|i1",
    torch.int16: "<i2",
    torch.int32: "<i4",
    torch.int64: "<i8",
    torch.float16: "<f2",
    torch.float32: "<f4",
    torch.float64: "<f8",
}
# Two-byte types the array interface has no code for travel as int16 and are viewed back.
_VIEWED_AS_INT16 = (torch.bfloat16,)


def resolve_placement(placement: str | None, use_uva: bool, device: torch.device) -> str | None:
    """The placement a loader uses: ``placement``, or :data:`PINNED` for ``use_uva=True``.

    Args:
        placement: None, ``"device"`` or ``"pinned"``.
        use_uva: DGL's spelling of ``placement="pinned"``.
        device: the loader's device.

    Returns:
        None (the CPU path), ``"device"`` or ``"pinned"``.

    Raises:
        ValueError: an unknown placement, ``use_uva`` with ``placement="device"``, or ``"pinned"`` on a
            device other than a GPU.
    """
    if placement is not None and placement not in PLACEMENTS:
        raise ValueError(f"placement must be None, 'device' or 'pinned', got {placement!r}")
    if use_uva:
        if placement == DEVICE:
            raise ValueError("use_uva=True reads pinned host memory; it excludes placement='device'")
        placement = PINNED
    if placement == PINNED and torch.device(device).type != "cuda":
        raise ValueError(
            f"use_uva / placement='pinned' let a GPU read pinned host memory; the loader's device is {device}"
        )
    return placement


class _ArrayInterface:
    """A host tensor's memory described as a CUDA array (see the module docstring)."""

    def __init__(self, host: torch.Tensor):
        self._host = host
        flat_type = torch.int16 if host.dtype in _VIEWED_AS_INT16 else host.dtype
        self.__cuda_array_interface__ = {
            "shape": tuple(host.shape),
            "typestr": _TYPESTR[flat_type],
            "data": (host.data_ptr(), True),
            "version": 2,
            "strides": None,
        }


def uva_view(host: torch.Tensor, device: torch.device) -> torch.Tensor:
    """A CUDA tensor over the memory of pinned ``host`` (contiguous), read by ``device``'s kernels.

    Raises:
        ValueError: ``host`` not pinned, not contiguous, or of a type with no array-interface code.
    """
    if not host.is_pinned():
        raise ValueError("uva_view needs a pinned host tensor")
    if not host.is_contiguous():
        raise ValueError("uva_view needs a contiguous host tensor")
    if host.dtype not in _TYPESTR and host.dtype not in _VIEWED_AS_INT16:
        raise ValueError(f"uva_view: no array-interface code for {host.dtype}")
    with torch.cuda.device(device):
        view = torch.as_tensor(_ArrayInterface(host), device=device)
    return view.view(host.dtype) if host.dtype in _VIEWED_AS_INT16 else view


def place(
    rows: torch.Tensor, device: torch.device, placement: str, dtype: torch.dtype | None = None
) -> torch.Tensor:
    """``rows`` held for ``device``'s kernels: a copy in the device's memory (``"device"``; on a CPU
    device, a copy in memory), or a pinned host copy read through a UVA view (``"pinned"``).

    Args:
        rows: a host tensor.
        device: the loader's device.
        placement: ``"device"`` or ``"pinned"``.
        dtype: the held type (a cast on the way; None keeps the type).

    Returns:
        The held tensor (never sharing memory with ``rows``).
    """
    dtype = rows.dtype if dtype is None else dtype
    if placement == DEVICE:
        held = torch.empty(rows.shape, dtype=dtype, device=device)
        held.copy_(rows)
        return held
    host = torch.empty(rows.shape, dtype=dtype, pin_memory=True)
    host.copy_(rows)
    return uva_view(host, device)
