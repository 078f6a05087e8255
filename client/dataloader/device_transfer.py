"""Where a loader's batches land, and the one place that moves a finished batch there.

A batch (IDs, blocks or pair graphs with their data, features, labels; typed batches are dicts per node
type) is produced on the CPU, possibly with some tensors already on the target GPU (rows a GPU feature
cache gathered there). :class:`BatchTransfer` then moves every tensor of it to the loader's device
(tensors already there stay as they are; blocks and pair graphs move by their own ``pin_memory()`` and
``to()``, which keep the frames their views share):

- host tensors are staged in pinned (page-locked) memory and copied with ``non_blocking=True``; pinned
  staging is on by default when the target is a GPU (``pin_memory=``);
- the batch is produced, staged and copied on a side CUDA stream (in the loader's worker thread when
  prefetching), and an event recorded there; the training loop's stream waits on that event when it
  takes the batch, and every CUDA tensor of the batch is marked as used by that stream
  (``record_stream``), so the copy of the next batches overlaps the compute on this one and no memory is
  handed back to the side stream while the training loop still reads it.

The device is always explicit: ``None`` means the trainer's bound device (:mod:`graphstore.client.device`)
or the CPU, ``"cuda"`` the trainer's GPU (``cuda:LOCAL_RANK``), never the thread's current CUDA device.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import torch

from graphstore.client.device import bound_device, cuda_device, pin_host_tensor

_SUPPORTED_TYPES = ("cpu", "cuda")


def resolve_device(requested: str | torch.device | None) -> torch.device:
    """The explicit device a loader or cache places its tensors on.

    Args:
        requested: ``None`` (the trainer's bound device, else the CPU), ``"cpu"``, ``"cuda"`` (the
            trainer's GPU: the bound one, or ``cuda:LOCAL_RANK`` bound now), ``"cuda:N"`` or a
            ``torch.device``.

    Returns:
        ``cpu`` or ``cuda:N`` (always with its index).

    Raises:
        ValueError: a device that is neither CPU nor CUDA, or a malformed string.
        RuntimeError: ``"cuda"`` on a trainer without a GPU of its own (see :func:`cuda_device`).
    """
    if requested is None:
        bound = bound_device()
        return bound if bound is not None else torch.device("cpu")
    try:
        device = torch.device(requested)
    except (RuntimeError, TypeError) as exc:
        raise ValueError(f"device must be cpu, cuda or cuda:N, got {requested!r}") from exc
    if device.type not in _SUPPORTED_TYPES:
        raise ValueError(f"device must be cpu, cuda or cuda:N, got {requested!r}")
    if device.type == "cuda" and device.index is None:
        return cuda_device()
    return device


def _is_graph_object(obj: Any) -> bool:
    """A block, pair graph or typed container: an object with its own ``to(device)`` (not a module)."""
    if isinstance(obj, torch.nn.Module) or not hasattr(obj, "__dict__"):
        return False
    return callable(getattr(obj, "to", None))


def map_batch(
    obj: Any, tensor_fn: Callable[[torch.Tensor], torch.Tensor], graph_fn: Callable[[Any], Any]
) -> Any:
    """A copy of ``obj`` with ``tensor_fn`` applied to each tensor and ``graph_fn`` to each graph object.

    Walks tensors, lists, tuples (named tuples too) and dicts (subclasses keep their type). A graph
    object (anything with a ``to`` method: blocks, pair graphs) is handed to ``graph_fn`` whole, since
    only the object knows how its frames and views share tensors. Other values are kept as they are.
    """
    if isinstance(obj, torch.Tensor):
        return tensor_fn(obj)
    if isinstance(obj, dict):
        out = copy.copy(obj)
        for key, value in obj.items():
            out[key] = map_batch(value, tensor_fn, graph_fn)
        return out
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):
        return type(obj)(*(map_batch(value, tensor_fn, graph_fn) for value in obj))
    if isinstance(obj, (list, tuple)):
        return type(obj)(map_batch(value, tensor_fn, graph_fn) for value in obj)
    if _is_graph_object(obj):
        return graph_fn(obj)
    return obj


def iter_tensors(obj: Any) -> Iterator[torch.Tensor]:
    """Every tensor reachable from ``obj`` (read only): through lists, tuples, dicts and the attributes of
    graph objects, each tensor once."""
    seen: set[int] = set()
    stack = [obj]
    while stack:
        item = stack.pop()
        if id(item) in seen:
            continue
        seen.add(id(item))
        if isinstance(item, torch.Tensor):
            yield item
        elif isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
        elif _is_graph_object(item):
            stack.extend(vars(item).values())


def host_to_device(tensor: torch.Tensor, device: torch.device, pin_memory: bool = True) -> torch.Tensor:
    """``tensor`` on ``device``: a host tensor bound for a GPU is staged in pinned memory (when
    ``pin_memory``) and copied without blocking; a GPU tensor bound for the host is copied blocking (its
    data must be there when this returns); anything else is ``tensor.to(device)``.

    The copy is ordered on the current stream of ``device`` (a loader's side stream while it produces
    a batch). Pinned staging memory comes from torch's caching host allocator, which reuses it only
    after the copy that reads it has finished.
    """
    if tensor.device == device:
        return tensor
    if device.type == "cuda" and tensor.device.type == "cpu":
        if pin_memory:
            with torch.cuda.device(device):
                tensor = pin_host_tensor(tensor)
        return tensor.to(device, non_blocking=True)
    return tensor.to(device)


@dataclass
class StagedBatch:
    """A moved batch and the event recorded after its copies (None when nothing ran on a GPU)."""

    batch: Any
    ready: Any = None


class BatchTransfer:
    """Moves finished batches to one device (see the module docstring).

    Args:
        device: the target, as resolved by :func:`resolve_device` (``cpu``, ``cuda:N``; tests also use
            ``meta``).
        pin_memory: stage host tensors in pinned memory; None: on when ``device`` is a GPU. With a CPU
            target, ``True`` gives pinned CPU batches (for the caller's own copies; needs a GPU).

    Raises:
        RuntimeError: ``pin_memory=True`` on a machine without CUDA.
    """

    def __init__(self, device: torch.device, pin_memory: bool | None = None):
        self.device = torch.device(device)
        is_cuda = self.device.type == "cuda"
        self.pin_memory = is_cuda if pin_memory is None else bool(pin_memory)
        if self.pin_memory and not torch.cuda.is_available():
            raise RuntimeError(
                f"pin_memory=True needs CUDA (page-locked memory is a CUDA facility), but none is available; "
                f"pass pin_memory=False for device {self.device}"
            )
        # The GPU whose context pins host memory, and the side stream batches are copied on.
        self._gpu: torch.device | None = None
        if is_cuda:
            self._gpu = self.device
        elif self.pin_memory:
            self._gpu = cuda_device()
        self._stream = torch.cuda.Stream(device=self.device) if is_cuda else None

    def move(self, batch: Any) -> Any:
        """``batch`` with every tensor on the target device (host tensors pinned first when pinning).

        Tensors already in place are kept (no copy). Blocks and pair graphs are moved by their own
        ``pin_memory()`` and ``to(device, non_blocking=True)``.
        """
        if self._gpu is None:
            return map_batch(batch, self._place_tensor, self._place_graph)
        with torch.cuda.device(self._gpu):
            return map_batch(batch, self._place_tensor, self._place_graph)

    def _in_place(self, tensor: torch.Tensor) -> bool:
        pinned = not (self.pin_memory and self.device.type == "cpu") or tensor.is_pinned()
        return tensor.device == self.device and pinned

    def _place_tensor(self, tensor: torch.Tensor) -> torch.Tensor:
        if self.device.type != "cpu":
            return host_to_device(tensor, self.device, self.pin_memory)
        tensor = tensor.cpu()
        return pin_host_tensor(tensor) if self.pin_memory else tensor

    def _place_graph(self, graph: Any) -> Any:
        tensors = list(iter_tensors(graph))
        if all(self._in_place(t) for t in tensors):
            return graph
        unpinned = any(t.device.type == "cpu" and not t.is_pinned() for t in tensors)
        if self.pin_memory and unpinned and callable(getattr(graph, "pin_memory", None)):
            graph = graph.pin_memory()
        if self.device.type == "cpu":
            return (
                graph if all(t.device.type == "cpu" for t in iter_tensors(graph)) else graph.to(self.device)
            )
        return graph.to(self.device, non_blocking=True)

    def producing(self) -> contextlib.AbstractContextManager:
        """The context a batch is produced and moved in: the side stream of a GPU target (also the
        thread's device for the duration), the pinning GPU of a pinned CPU target, else nothing."""
        if self._stream is not None:
            return torch.cuda.stream(self._stream)
        if self._gpu is not None:
            return torch.cuda.device(self._gpu)
        return contextlib.nullcontext()

    def stage(self, batch: Any) -> StagedBatch:
        """Move ``batch`` (inside :meth:`producing`) and record when its copies are done."""
        moved = self.move(batch)
        if self._stream is None:
            return StagedBatch(moved)
        event = torch.cuda.Event()
        event.record(self._stream)
        return StagedBatch(moved, event)

    def deliver(self, staged: StagedBatch) -> Any:
        """The batch, safe to use on the calling thread's current stream of the target device."""
        if staged.ready is None:
            return staged.batch
        consumer = torch.cuda.current_stream(self.device)
        consumer.wait_event(staged.ready)
        for tensor in iter_tensors(staged.batch):
            if tensor.is_cuda:
                tensor.record_stream(consumer)
        return staged.batch
