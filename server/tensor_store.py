"""Named tensors of one partition: the rows this partition owns, their locks and versions.

A partition owns the contiguous global node IDs ``[node_start, node_end)`` and edge IDs
``[edge_start, edge_end)``; every tensor stores the rows of one of those ranges in local order
(local row ``i`` is global ID ``start + i``). Two kinds of tensors live here:

- partition tensors, loaded from the partition files: memory-mapped and read-only, or copied into
  memory and writable when the server runs with ``--writable-features``;
- run-time tensors created by :meth:`TensorStore.init`: in memory and writable.

Concurrency: reads of a read-only tensor take no lock. A writable tensor has a readers-writer lock:
reads run in parallel with each other, a write holds the tensor exclusively for the whole request,
so no reader sees a half-written request and concurrent ``add`` pushes never lose updates. numpy
releases the GIL in the gathers and scatters, so parallel reads use several cores.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

import numpy as np

from graphstore import dtypes
from graphstore.server.gather import RowGatherer
from graphstore.server.id_range import IdRange, to_local_ids
from graphstore.server.initializers import fill_initial
from graphstore.server.memory_budget import MemoryBudget
from graphstore.server.row_arithmetic import scatter_add
from graphstore.server.stored_tensor import StoredTensor
from graphstore.types import INITIALIZERS, InitSpec, TensorScheme

logger = logging.getLogger(__name__)


class TensorStore:
    """The named tensors of one partition.

    Args:
        part_id: this partition's index (error messages, per-partition init seeds).
        ranges: the IDs this partition owns in each ID space, by policy (``"node"``, ``"edge"``, and
            on a typed graph ``"node:<ntype>"`` / ``"edge:<src>:<etype>:<dst>"``).
        gatherer: how pulls gather rows (default: split large pulls across the usable CPUs).
        memory: admits new tensors against the server's memory budget (default: the host's and the
            cgroup's free memory minus 256 MiB).
    """

    def __init__(
        self,
        part_id: int,
        ranges: Mapping[str, IdRange],
        gatherer: RowGatherer | None = None,
        memory: MemoryBudget | None = None,
    ) -> None:
        self.part_id = part_id
        self.memory = memory if memory is not None else MemoryBudget()
        self._ranges = dict(ranges)
        self._tensors: dict[str, StoredTensor] = {}
        self._registry_lock = threading.Lock()
        self._gatherer = gatherer if gatherer is not None else RowGatherer()

    def close(self) -> None:
        """Stop the gather threads (a later large pull starts them again)."""
        self._gatherer.close()

    # -- lookup ---------------------------------------------------------------------------------

    def id_range(self, policy: str) -> IdRange:
        """The owned ID range of ``policy``.

        Raises:
            ValueError: a policy that names no ID space of this graph.
        """
        try:
            return self._ranges[policy]
        except KeyError:
            raise ValueError(f"policy must be one of {sorted(self._ranges)}, got {policy!r}") from None

    def to_local(self, policy: str, ids: np.ndarray, arg: str = "ids") -> np.ndarray:
        """Global IDs of ``policy`` -> local row indices, range-checked (see :func:`to_local_ids`)."""
        r = self.id_range(policy)
        return to_local_ids(ids, r.start, r.end, arg, policy, self.part_id)

    def get(self, name: str) -> StoredTensor:
        """The tensor called ``name``.

        Raises:
            KeyError: no such tensor.
        """
        tensor = self._tensors.get(name)
        if tensor is None:
            raise KeyError(f"no tensor named {name!r} on partition {self.part_id}")
        return tensor

    def names(self) -> list[str]:
        """Names of all tensors, sorted."""
        with self._registry_lock:
            return sorted(self._tensors)

    def schemes(self) -> list[TensorScheme]:
        """Schemes of all tensors, sorted by name."""
        with self._registry_lock:
            tensors = list(self._tensors.values())
        return sorted((t.scheme() for t in tensors), key=lambda s: s.name)

    # -- creation and deletion ------------------------------------------------------------------

    def add_partition_tensor(
        self, name: str, array: np.ndarray, dtype: str, policy: str, writable: bool
    ) -> None:
        """Register a tensor loaded from the partition files.

        Args:
            name: the tensor's name.
            array: local rows (usually memory-mapped); copied into memory when ``writable``.
            dtype: canonical dtype name.
            policy: the ID space (see :meth:`id_range`).
            writable: allow Push / PushGrad (the rows are then copied into memory).

        Raises:
            ValueError: the array's row count is not this partition's row count for ``policy``.
            FileExistsError: a tensor with this name exists.
        """
        id_range = self.id_range(policy)
        if array.ndim < 1 or array.shape[0] != id_range.size:
            raise ValueError(
                f"partition tensor {name!r} has shape {list(array.shape)}, expected {id_range.size} rows"
            )
        # A plain ndarray view of the mapped file (np.memmap's subclass adds overhead to every index).
        array = np.array(array, copy=True) if writable else np.asarray(array)
        tensor = StoredTensor(
            name=name,
            dtype=dtype,
            policy=policy,
            global_rows=id_range.total,
            data=array,
            writable=writable,
            persistent=True,
            from_partition=True,
        )
        self.insert(tensor)

    def init(
        self,
        name: str,
        shape: tuple[int, ...],
        dtype: str,
        policy: str,
        persistent: bool = False,
        init: InitSpec = InitSpec(),
        owner: str = "",
    ) -> tuple[bool, TensorScheme]:
        """Create a run-time tensor, or attach to an existing one with the same scheme.

        Args:
            name: the tensor's name (non-empty).
            shape: global shape; ``shape[0]`` must be the graph's number of nodes (``policy="node"``)
                or edges (``"edge"``), the other dimensions positive.
            dtype: canonical dtype name.
            policy: the ID space (see :meth:`id_range`).
            persistent: kept when its creator releases it.
            init: how the rows start; random kinds draw from ``init.seed + part_id``.
            owner: the creating client's id.

        Returns:
            ``(True, scheme)`` when created, ``(False, scheme)`` when attached.

        Raises:
            ValueError: empty name, bad shape / dtype / policy / initializer.
            FileExistsError: ``name`` exists with another shape, dtype or policy.
            MemoryBudgetError: (a MemoryError) the rows do not fit the server's memory budget.
        """
        if not isinstance(name, str) or not name:
            raise ValueError(f"name: a tensor needs a non-empty name, got {name!r}")
        dtypes.info(dtype)
        id_range = self.id_range(policy)
        shape = tuple(int(d) for d in shape)
        if len(shape) < 1:
            raise ValueError(f"shape: needs at least one dimension, got {list(shape)}")
        if shape[0] != id_range.total:
            raise ValueError(
                f"shape: shape[0] of a {policy} tensor must be the number of {_what(policy)} "
                f"({id_range.total}), got {list(shape)}"
            )
        if any(d <= 0 for d in shape[1:]):
            raise ValueError(f"shape: row dimensions must be positive, got {list(shape)}")
        if init.kind not in INITIALIZERS:
            raise ValueError(f"init.kind must be one of {INITIALIZERS}, got {init.kind!r}")
        attached = self._attach_or_register(name, shape, dtype, policy)
        if attached is not None:
            return False, attached
        local_shape = (id_range.size, *shape[1:])
        itemsize = dtypes.info(dtype).storage.itemsize
        nbytes = int(np.prod(local_shape, dtype=object)) * itemsize
        with self.memory.admit(nbytes, f"tensor {name!r} of shape {list(shape)} on partition {self.part_id}"):
            data = np.empty(local_shape, dtype=dtypes.info(dtype).storage)
            fill_initial(data, dtype, init, init.seed + self.part_id)
        tensor = StoredTensor(
            name=name,
            dtype=dtype,
            policy=policy,
            global_rows=id_range.total,
            data=data,
            writable=True,
            persistent=persistent,
            owner=owner,
        )
        attached = self._attach_or_register(name, shape, dtype, policy, tensor)
        if attached is not None:  # created concurrently by another client
            return False, attached
        logger.info("created tensor %r %s %s (%s, init=%s)", name, dtype, list(shape), policy, init.kind)
        return True, tensor.scheme()

    def _attach_or_register(
        self,
        name: str,
        shape: tuple[int, ...],
        dtype: str,
        policy: str,
        tensor: StoredTensor | None = None,
    ) -> TensorScheme | None:
        """The scheme of the existing tensor ``name`` (checked against the request), or None after
        registering ``tensor`` (when given) under that name, in one step under the registry lock."""
        with self._registry_lock:
            existing = self._tensors.get(name)
            if existing is not None:
                return self._attach(existing, shape, dtype, policy)
            if tensor is not None:
                self._tensors[name] = tensor
            return None

    def _attach(
        self, existing: StoredTensor, shape: tuple[int, ...], dtype: str, policy: str
    ) -> TensorScheme:
        scheme = existing.scheme()
        if scheme.shape != shape or scheme.dtype != dtype or scheme.policy != policy:
            raise FileExistsError(
                f"tensor {existing.name!r} exists as {scheme.dtype} {list(scheme.shape)} ({scheme.policy}); "
                f"requested {dtype} {list(shape)} ({policy})"
            )
        return scheme

    def insert(self, tensor: StoredTensor) -> None:
        """Register a fully built tensor (used by restore).

        Raises:
            FileExistsError: a tensor with this name exists.
        """
        with self._registry_lock:
            if tensor.name in self._tensors:
                raise FileExistsError(f"tensor {tensor.name!r} already exists on partition {self.part_id}")
            self._tensors[tensor.name] = tensor

    def delete(self, name: str) -> bool:
        """Delete a run-time tensor.

        Returns:
            True when deleted, False when no tensor has this name.

        Raises:
            PermissionError: the tensor was loaded from the partition files.
        """
        with self._registry_lock:
            tensor = self._tensors.get(name)
            if tensor is None:
                return False
            if tensor.from_partition:
                raise PermissionError(
                    f"tensor {name!r} is loaded from the partition files and cannot be deleted"
                )
            del self._tensors[name]
        logger.info("deleted tensor %r", name)
        return True

    # -- reads and writes -----------------------------------------------------------------------

    def pull(self, name: str, ids: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        """Rows of ``name`` for global ``ids``, in request order.

        Args:
            name: the tensor.
            ids: global IDs owned here.
            out: optional destination of shape ``(len(ids), *row_shape)`` and the storage dtype (the
                server gathers straight into its answer's bytes); a new array when omitted.

        Returns:
            ``out``, or a new C-contiguous array.

        Raises:
            KeyError: unknown tensor.
            ValueError: an ID outside this partition's range, or an ``out`` of the wrong shape or dtype.
        """
        tensor = self.get(name)
        local = self.to_local(tensor.policy, ids)
        if out is None:
            out = np.empty((len(local), *tensor.row_shape), dtype=tensor.data.dtype)
        elif out.shape != (len(local), *tensor.row_shape) or out.dtype != tensor.data.dtype:
            raise ValueError(
                f"out: expected {tensor.data.dtype} {[len(local), *tensor.row_shape]}, "
                f"got {out.dtype} {list(out.shape)}"
            )
        # A gather into a destination beats fancy indexing (which allocates its result).
        if not tensor.writable:
            return self._gatherer.take(tensor.data, local, out)
        with tensor.lock.read():
            return self._gatherer.take(tensor.data, local, out)

    def push(self, name: str, ids: np.ndarray, rows: np.ndarray, op: str = "assign") -> int:
        """Assign or add rows, atomically for the whole request.

        ``assign`` with a repeated ID keeps the last row; ``add`` sums every occurrence (16-bit floats
        accumulate in float32 and round once).

        Returns:
            The tensor's new version.

        Raises:
            KeyError: unknown tensor.
            PermissionError: the tensor is read-only.
            ValueError: bad op, IDs out of range, rows of the wrong dtype or shape.
        """
        tensor = self.get(name)
        if not tensor.writable:
            raise PermissionError(
                f"tensor {name!r} is read-only (loaded from the partition files; start the server "
                "with --writable-features to allow writes)"
            )
        if op not in ("assign", "add"):
            raise ValueError(f"op must be 'assign' or 'add', got {op!r}")
        local = self.to_local(tensor.policy, ids)
        rows = np.asarray(rows)
        if rows.dtype != tensor.data.dtype:
            raise ValueError(
                f"rows: dtype {rows.dtype} does not match tensor {name!r} of dtype {tensor.dtype} "
                f"(storage {tensor.data.dtype})"
            )
        expected = (len(local), *tensor.row_shape)
        if rows.shape != expected:
            raise ValueError(
                f"rows: shape {list(rows.shape)} does not match {list(expected)} for tensor {name!r}"
            )
        with tensor.lock.write():
            if op == "assign":
                tensor.data[local] = rows
            else:
                scatter_add(tensor.data, local, rows, tensor.dtype)
            tensor.version += 1
            return tensor.version

    @contextmanager
    def writing(self, name: str) -> Iterator[StoredTensor]:
        """Hold ``name``'s write lock; bumps its version when the block completes.

        Raises:
            KeyError: unknown tensor.
            PermissionError: the tensor is read-only.
        """
        tensor = self.get(name)
        if not tensor.writable:
            raise PermissionError(f"tensor {name!r} is read-only")
        with tensor.lock.write():
            yield tensor
            tensor.version += 1

    @contextmanager
    def reading(self, name: str) -> Iterator[StoredTensor]:
        """Hold ``name``'s read lock (a consistent snapshot for checkpoints).

        Raises:
            KeyError: unknown tensor.
        """
        tensor = self.get(name)
        if not tensor.writable:
            yield tensor
            return
        with tensor.lock.read():
            yield tensor


def _what(policy: str) -> str:
    """``"nodes"`` / ``"edges"``, or ``"node:paper IDs"`` for a typed ID space (error messages)."""
    return f"{policy}s" if ":" not in policy else f"{policy} IDs"
