"""The trainer's device: ``cuda:LOCAL_RANK`` among the visible GPUs, an explicit choice, or the CPU; and
the device a process group's collectives run on.

The library never asks for a thread's current CUDA device (``torch.cuda.current_device()`` is per thread
and 0 in any thread that never set it, e.g. a loader's worker or the optimizer's background thread).
Instead a trainer is *bound* to one device: by ``initialize(device=...)``, by the training loop's
``--device``, or on its first GPU use (``cuda:LOCAL_RANK``); every CUDA tensor the library creates for
a collective goes to :func:`group_device`.

The choice itself is a pure function (:func:`select_device`): ``cuda`` means ``cuda:LOCAL_RANK``
counted among the GPUs ``CUDA_VISIBLE_DEVICES`` leaves visible, and a rank with no GPU of its own is an
error, never a silent wrap-around onto another rank's GPU.
"""

from __future__ import annotations

import os
import threading

import torch

LOCAL_RANK_ENV = "LOCAL_RANK"
VISIBLE_DEVICES_ENV = "CUDA_VISIBLE_DEVICES"

_lock = threading.Lock()
_bound: torch.device | None = None


def select_device(
    requested: str | torch.device | None,
    *,
    local_rank: int,
    num_visible_gpus: int,
    visible_devices: str | None = None,
) -> torch.device:
    """The device a trainer binds to (a pure function: no CUDA call, no environment read).

    Args:
        requested: ``None`` / ``"auto"`` (``cuda:LOCAL_RANK`` when a GPU is visible, else the CPU),
            ``"cpu"``, ``"cuda"`` (``cuda:LOCAL_RANK``), ``"cuda:N"`` or a ``torch.device``.
        local_rank: this trainer's rank on its host (``LOCAL_RANK``).
        num_visible_gpus: the GPUs this process sees (``torch.cuda.device_count()``, which honours
            ``CUDA_VISIBLE_DEVICES``: ``cuda:0`` is the first GPU that variable lists).
        visible_devices: ``CUDA_VISIBLE_DEVICES`` as set, only quoted in error messages.

    Returns:
        ``cpu`` or ``cuda:N`` with ``N < num_visible_gpus``.

    Raises:
        ValueError: a malformed ``requested``, a negative ``local_rank``, or a device other than CPU/CUDA.
        RuntimeError: CUDA requested with no visible GPU, or a GPU index (``LOCAL_RANK`` or ``N``) at or
            above the number of visible GPUs.
    """
    if local_rank < 0:
        raise ValueError(f"{LOCAL_RANK_ENV} must be >= 0, got {local_rank}")
    if requested is None or requested == "auto":
        if num_visible_gpus == 0:
            return torch.device("cpu")
        requested = "cuda"
    try:
        device = torch.device(requested)
    except (RuntimeError, TypeError) as exc:
        raise ValueError(f"device must be cpu, cuda, cuda:N or auto, got {requested!r}") from exc
    if device.type == "cpu":
        return torch.device("cpu")
    if device.type != "cuda":
        raise ValueError(f"device must be cpu, cuda, cuda:N or auto, got {requested!r}")
    shown = "unset" if visible_devices is None else repr(visible_devices)
    if num_visible_gpus == 0:
        raise RuntimeError(
            f"device {str(requested)!r} requested but CUDA is not available (no visible GPU; "
            f"{VISIBLE_DEVICES_ENV} is {shown})"
        )
    if device.index is None:
        if local_rank >= num_visible_gpus:
            raise RuntimeError(
                f"{LOCAL_RANK_ENV}={local_rank} has no GPU of its own: this process sees {num_visible_gpus} "
                f"GPU(s) ({VISIBLE_DEVICES_ENV} is {shown}); start at most {num_visible_gpus} GPU trainers "
                "per host, or pass an explicit device='cuda:N' to share a GPU (with a cpu:gloo group "
                "for the collectives)"
            )
        return torch.device("cuda", local_rank)
    if device.index >= num_visible_gpus:
        raise RuntimeError(
            f"device {str(requested)!r} does not exist: this process sees {num_visible_gpus} GPU(s) "
            f"({VISIBLE_DEVICES_ENV} is {shown})"
        )
    return device


def backend_device_type(backend: str) -> str:
    """The device type a process group's collectives run on, from its backend string (pure).

    A group with a CPU backend (``gloo``, ``mpi``, ``cpu:gloo``, ``cpu:gloo,cuda:nccl``) runs them on the
    CPU, an NCCL-only group (``nccl``, ``cuda:nccl``) on the GPU. The choice depends only on the
    backend, which every member of the group shares, so all of them make the same one.

    Args:
        backend: ``str(torch.distributed.get_backend(group))``.

    Returns:
        ``"cpu"`` or ``"cuda"``.
    """
    devices = set()
    for entry in str(backend).lower().split(","):
        device_type, _, name = entry.strip().rpartition(":")
        devices.add(device_type or ("cuda" if name == "nccl" else "cpu"))
    return "cpu" if "cpu" in devices or "cuda" not in devices else "cuda"


def collective_device(backend: str, trainer_device: torch.device | None) -> torch.device:
    """Where a process group's collectives run for a trainer bound to ``trainer_device`` (pure).

    Args:
        backend: the group's backend string (see :func:`backend_device_type`).
        trainer_device: this trainer's device (needed only by an NCCL-only group).

    Returns:
        The CPU, or ``trainer_device`` for an NCCL-only group.

    Raises:
        RuntimeError: an NCCL-only group on a trainer that is not bound to a GPU.
    """
    if backend_device_type(backend) == "cpu":
        return torch.device("cpu")
    if trainer_device is None or trainer_device.type != "cuda":
        raise RuntimeError(
            f"the process group's backend {backend!r} runs collectives on CUDA only, but this trainer is "
            f"bound to {trainer_device}; use a gloo or cpu:gloo,cuda:nccl group for CPU trainers"
        )
    return trainer_device


def bind_device(requested: str | torch.device | None = None) -> torch.device:
    """Bind this process's trainer to a device (see :func:`select_device`), from its environment.

    A CUDA device also becomes the calling thread's current device (for the user's own code); the
    library itself always names the bound device explicitly.

    Args:
        requested: as in :func:`select_device`.

    Returns:
        The bound device. Binding again to the same device is a no-op.

    Raises:
        ValueError / RuntimeError: as in :func:`select_device`; ``LOCAL_RANK`` not an integer.
        RuntimeError: already bound to another device (the bound device does not change while
            connected; ``exit_client()`` releases it).
    """
    global _bound
    device = select_device(requested, local_rank=_local_rank(), **_visible_gpus())
    with _lock:
        if _bound is not None and _bound != device:
            raise RuntimeError(
                f"this trainer is already bound to {_bound}; it cannot switch to {device} while connected "
                "(call exit_client() first)"
            )
        _bound = device
    if device.type == "cuda":
        torch.cuda.set_device(device)
    return device


def bound_device() -> torch.device | None:
    """The device this trainer is bound to, or None when nothing bound it yet."""
    return _bound


def cuda_device() -> torch.device:
    """This trainer's GPU: the bound device, or ``cuda:LOCAL_RANK`` bound now (the first GPU use).

    Raises:
        RuntimeError: no visible GPU, ``LOCAL_RANK`` without a GPU of its own, or a trainer bound to the CPU.
    """
    device = _bound if _bound is not None else bind_device("cuda")
    if device.type != "cuda":
        raise RuntimeError(f"this trainer is bound to {device}, but a CUDA device is needed")
    return device


def group_device(group=None) -> torch.device:
    """Where the collectives of ``group`` (None: the default group) run for this trainer: the CPU, or
    for an NCCL-only group the bound GPU (``cuda:LOCAL_RANK`` bound now when nothing is bound yet).

    Raises:
        RuntimeError: as in :func:`collective_device` and :func:`cuda_device`.
    """
    import torch.distributed as dist

    backend = str(dist.get_backend(group))
    if backend_device_type(backend) == "cpu":
        return torch.device("cpu")
    return collective_device(backend, _bound if _bound is not None else cuda_device())


def pin_host_tensor(tensor: torch.Tensor) -> torch.Tensor:
    """``tensor`` in pinned (page-locked) host memory, for non-blocking copies to a GPU: a copy from
    torch's caching host allocator, unless it is pinned already; a GPU tensor as it is. Needs CUDA."""
    return tensor if tensor.device.type != "cpu" or tensor.is_pinned() else tensor.pin_memory()


def unbind_device() -> None:
    """Forget the bound device (``exit_client()`` calls this)."""
    global _bound
    with _lock:
        _bound = None


def _local_rank() -> int:
    value = os.environ.get(LOCAL_RANK_ENV, "0") or "0"
    try:
        return int(value)
    except ValueError:
        raise ValueError(f"{LOCAL_RANK_ENV} must be an integer, got {value!r}") from None


def _visible_gpus() -> dict:
    visible = os.environ.get(VISIBLE_DEVICES_ENV)
    # torch applies CUDA_VISIBLE_DEVICES itself; the count is taken from it, the variable only quoted.
    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    return {"num_visible_gpus": count, "visible_devices": visible}
