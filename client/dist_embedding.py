"""DistEmbedding: trainable node (or edge) embeddings stored on the partition servers.

Follows ``dgl.distributed.DistEmbedding``. ``emb(ids)`` pulls the rows, makes them a leaf that
requires grad, and records ``(ids, rows)`` in :attr:`DistEmbedding.trace`; after ``loss.backward()`` a
sparse optimizer (:mod:`graphstore.client.optim`) reads ``rows.grad`` from the trace, sends the
gradients to the rows' owners, and calls :meth:`DistEmbedding.reset_trace`.

Under ``torch.autocast`` the rows come back in the autocast dtype (float16 / bfloat16) while the
recorded leaf stays float32, so the optimizer always sees float32 gradients.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable

import numpy as np
import torch

from graphstore.client.dist_tensor import DistTensor
from graphstore.client.routing import normalize_index
from graphstore.types import InitSpec

# Lookups recorded without an optimizer step before the trace warning fires.
DEFAULT_TRACE_WARN_CALLS = 256


class DistEmbedding:
    """A ``[num_embeddings, embedding_dim]`` table of trainable rows, sharded like the graph.

    Args:
        num_embeddings: the number of nodes (or edges) of the graph.
        embedding_dim: width of a row.
        name: the table's name on the cluster (later tables of the same name attach to it); None: a
            name unique to this client.
        init_func: ``init_func(part_shape, dtype) -> tensor`` called once per partition this client
            creates, or an :class:`~graphstore.types.InitSpec` the servers run; None: zeros.
        part_policy: ``'node'`` / ``'edge'`` or a PartitionPolicy; None: inferred from ``num_embeddings``.
        persistent: keep the table after its creator releases it.
        dtype: storage dtype of the rows (float32 by default; the optimizers need float32).
        trace_warn_calls: warn once when this many lookups are recorded with no optimizer step.

    Attributes:
        weight: the :class:`DistTensor` holding the rows.
        trace: ``list[tuple[ids, rows]]``: per recorded lookup, the int64 CPU ids and the leaf rows that
            require grad (their ``.grad`` is the lookup's gradient after ``backward()``); the optimizer
            consumes it and calls :meth:`reset_trace`.
        num_embeddings, embedding_dim: the table's shape.

    Raises:
        ValueError, TypeError, RuntimeError: as for :class:`DistTensor`.
    """

    def __init__(
        self,
        num_embeddings: int,
        embedding_dim: int,
        name: str | None = None,
        init_func: Callable | InitSpec | None = None,
        part_policy=None,
        *,
        persistent: bool = False,
        dtype: torch.dtype = torch.float32,
        trace_warn_calls: int = DEFAULT_TRACE_WARN_CALLS,
    ):
        if int(embedding_dim) < 1:
            raise ValueError(f"embedding_dim must be at least 1, got {embedding_dim}")
        self.weight = DistTensor(
            (int(num_embeddings), int(embedding_dim)),
            dtype,
            name=name,
            init_func=init_func,
            part_policy=part_policy,
            persistent=persistent,
        )
        self.num_embeddings = int(num_embeddings)
        self.embedding_dim = int(embedding_dim)
        self.trace: list[tuple[torch.Tensor, torch.Tensor]] = []
        self._trace_warn_calls = int(trace_warn_calls)
        self._warned = False

    @property
    def name(self) -> str:
        """The table's name on the cluster."""
        return self.weight.name

    @property
    def part_policy(self):
        """The partition policy of the rows."""
        return self.weight.part_policy

    def __call__(self, idx, device=None) -> torch.Tensor:
        """Rows for ``idx`` on ``device``; recorded for the optimizer when autograd is on.

        Args:
            idx: int tensor / array / list of row IDs (duplicates allowed).
            device: where to put the rows (default: CPU).

        Returns:
            ``[len(ids), embedding_dim]`` rows; a leaf requiring grad (or its autocast-dtype view).

        Raises:
            IndexError: an ID out of range.
            TypeError: a float index.
        """
        ids_np = normalize_index(idx, self.num_embeddings, what=f"ids of DistEmbedding {self.name!r}")
        rows = self.weight.read(ids_np)
        if device is not None:
            rows = rows.to(device)
        if not torch.is_grad_enabled():
            return rows
        rows.requires_grad_(True)
        self.trace.append((torch.from_numpy(np.array(ids_np, dtype=np.int64, copy=True)), rows))
        if len(self.trace) >= self._trace_warn_calls and not self._warned:
            self._warned = True
            warnings.warn(
                f"DistEmbedding {self.name!r} has recorded {len(self.trace)} lookups without an optimizer "
                "step; call the sparse optimizer's step() (or emb.reset_trace()) so their rows and "
                "gradients are freed",
                UserWarning,
                stacklevel=2,
            )
        dtype = _autocast_dtype(rows.device.type)
        if dtype is not None and rows.dtype == torch.float32:
            return rows.to(dtype)
        return rows

    def reset_trace(self) -> None:
        """Forget the recorded lookups (the optimizer calls this after a step)."""
        self.trace = []
        self._warned = False

    def __reduce__(self):
        """Pickling (``torch.save``) writes the table's name and shape, not its rows or optimizer state,
        as DGL does; unpickling in a process connected to the same graph attaches to the table of that
        name (see :func:`attach_pickled_embedding`)."""
        return attach_pickled_embedding, (type(self), self.weight)

    @classmethod
    def _attached(cls, weight: DistTensor) -> DistEmbedding:
        """An embedding over an existing table (never creates nor deletes it)."""
        emb = cls.__new__(cls)
        emb.weight = weight
        emb.num_embeddings, emb.embedding_dim = int(weight.shape[0]), int(weight.shape[1])
        emb.trace = []
        emb._trace_warn_calls = DEFAULT_TRACE_WARN_CALLS
        emb._warned = False
        return emb

    def __repr__(self) -> str:
        return (
            f"DistEmbedding(name={self.name!r}, num_embeddings={self.num_embeddings}, "
            f"embedding_dim={self.embedding_dim}, dtype={self.weight.dtype})"
        )


def attach_pickled_embedding(cls: type, weight: DistTensor) -> DistEmbedding:
    """A pickled DistEmbedding (``torch.load``): the table of that name on the connected graph.

    Args:
        cls: the class that was pickled.
        weight: its rows' DistTensor, itself unpickled by name (see
            :func:`graphstore.client.dist_tensor.attach_pickled`).

    Raises:
        RuntimeError, KeyError, ValueError: as :func:`~graphstore.client.dist_tensor.attach_pickled`.
    """
    return cls._attached(weight)


def _autocast_dtype(device_type: str) -> torch.dtype | None:
    """The dtype ``torch.autocast`` casts to on ``device_type`` right now, or None when it is off."""
    if hasattr(torch, "get_autocast_dtype"):  # torch >= 2.4
        return torch.get_autocast_dtype(device_type) if torch.is_autocast_enabled(device_type) else None
    if device_type == "cuda":
        return torch.get_autocast_gpu_dtype() if torch.is_autocast_enabled() else None
    if device_type == "cpu":
        return torch.get_autocast_cpu_dtype() if torch.is_autocast_cpu_enabled() else None
    return None
