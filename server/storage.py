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
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np

from graphstore import dtypes
from graphstore.dtypes import bfloat16_bits_to_float32, float32_to_bfloat16_bits
from graphstore.ids import as_id_array, first_outside
from graphstore.server.gather import RowGatherer
from graphstore.types import EDGE, INITIALIZERS, NODE, InitSpec, TensorScheme

logger = logging.getLogger(__name__)

# Rows generated per step by the random initializers (bounds their temporary memory).
_INIT_CHUNK_ROWS = 1 << 16


class ReadWriteLock:
    """A writer-preferring readers-writer lock: many readers or one writer.

    A waiting writer blocks new readers so that a stream of pulls cannot starve a push.
    """

    def __init__(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._readers = 0
        self._writer = False
        self._writers_waiting = 0

    @contextmanager
    def read(self) -> Iterator[None]:
        """Hold the lock shared for the duration of the ``with`` block."""
        with self._cond:
            while self._writer or self._writers_waiting:
                self._cond.wait()
            self._readers += 1
        try:
            yield
        finally:
            with self._cond:
                self._readers -= 1
                if self._readers == 0:
                    self._cond.notify_all()

    @contextmanager
    def write(self) -> Iterator[None]:
        """Hold the lock exclusively for the duration of the ``with`` block."""
        with self._cond:
            self._writers_waiting += 1
            try:
                while self._writer or self._readers:
                    self._cond.wait()
            finally:
                self._writers_waiting -= 1
            self._writer = True
        try:
            yield
        finally:
            with self._cond:
                self._writer = False
                self._cond.notify_all()


# ----------------------------------------------------------------------------------------------
# Pure helpers
# ----------------------------------------------------------------------------------------------


def to_local_ids(ids: np.ndarray, start: int, end: int, arg: str, what: str, part_id: int) -> np.ndarray:
    """Convert global IDs to local row indices of the range ``[start, end)`` owned by ``part_id``.

    Args:
        ids: 1-d integer array of global IDs.
        start, end: the owned global ID range.
        arg: the argument's name for error messages.
        what: ``"node"`` or ``"edge"``.
        part_id: this partition, for error messages.

    Returns:
        int64 local indices (``ids - start``).

    Raises:
        ValueError: ``ids`` is not 1-d, or an ID is negative or outside ``[start, end)``; the message
            names the first offending ID.
    """
    ids = as_id_array(ids, arg, one_dim=True)
    bad = first_outside(ids, start, end)
    if bad is not None:
        raise ValueError(
            f"{arg}: {what} ID {bad} is not owned by partition {part_id} "
            f"(it owns {what} IDs [{start}, {end}))"
        )
    return ids - start


def _widen(values: np.ndarray, dtype: str) -> np.ndarray:
    """Values in a dtype safe to accumulate in (float32 for the 16-bit floats)."""
    if dtype == "bfloat16":
        return bfloat16_bits_to_float32(values)
    if dtype == "float16":
        return values.astype(np.float32)
    return values


def _narrow(values: np.ndarray, dtype: str) -> np.ndarray:
    if dtype == "bfloat16":
        return float32_to_bfloat16_bits(values)
    if dtype == "float16":
        return values.astype(np.float16)
    return values


def fill_initial(array: np.ndarray, dtype: str, init: InitSpec, seed: int) -> None:
    """Fill a new tensor's local rows in place according to ``init``.

    Args:
        array: the storage array (local rows).
        dtype: its canonical dtype name.
        init: the initializer; ``uniform``/``normal`` need a float dtype.
        seed: the random seed of this partition (``init.seed + part_id``).

    Raises:
        ValueError: unknown kind, random init of a non-float dtype, ``uniform`` with a > b,
            ``normal`` with a negative std.
    """
    if init.kind in ("zeros", "pushed"):
        array[...] = 0
        return
    if init.kind == "constant":
        value = np.array([init.a], dtype=np.float64)
        array[...] = float32_to_bfloat16_bits(value.astype(np.float32))[0] if dtype == "bfloat16" else init.a
        return
    if init.kind not in ("uniform", "normal"):
        raise ValueError(f"init.kind must be one of {INITIALIZERS}, got {init.kind!r}")
    if not dtypes.info(dtype).is_float:
        raise ValueError(f"init.kind {init.kind!r} needs a floating-point dtype, got {dtype}")
    if init.kind == "uniform" and not init.a <= init.b:
        raise ValueError(f"init: uniform(a, b) needs a <= b, got a={init.a}, b={init.b}")
    if init.kind == "normal" and not init.b >= 0:
        raise ValueError(f"init: normal(mean=a, std=b) needs std >= 0, got b={init.b}")
    rng = np.random.default_rng(seed)
    flat = array.reshape(len(array), -1)
    for lo in range(0, len(flat), _INIT_CHUNK_ROWS):
        chunk_shape = flat[lo : lo + _INIT_CHUNK_ROWS].shape
        if init.kind == "uniform":
            values = init.a + (init.b - init.a) * rng.random(chunk_shape, dtype=np.float32)
        else:
            values = init.a + init.b * rng.standard_normal(chunk_shape, dtype=np.float32)
        flat[lo : lo + _INIT_CHUNK_ROWS] = _narrow(values.astype(np.float32, copy=False), dtype)


def _available_memory_bytes() -> int | None:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


# ----------------------------------------------------------------------------------------------
# Tensors
# ----------------------------------------------------------------------------------------------


@dataclass
class StoredTensor:
    """One named tensor's local rows and bookkeeping.

    Attributes:
        name, dtype, policy, persistent, writable, from_partition, owner: see :class:`TensorScheme`.
        global_rows: number of rows of the whole tensor (nodes or edges of the graph).
        data: local rows in storage form; row ``i`` is global ID ``start + i``.
        version: bumps on every write.
        lock: readers-writer lock (used only when writable).
    """

    name: str
    dtype: str
    policy: str
    global_rows: int
    data: np.ndarray
    writable: bool
    persistent: bool = False
    from_partition: bool = False
    owner: str = ""
    version: int = 0
    lock: ReadWriteLock = field(default_factory=ReadWriteLock, repr=False)

    @property
    def row_shape(self) -> tuple[int, ...]:
        return tuple(self.data.shape[1:])

    def scheme(self) -> TensorScheme:
        """This tensor's :class:`TensorScheme` (global shape)."""
        return TensorScheme(
            name=self.name,
            dtype=self.dtype,
            shape=(self.global_rows, *self.row_shape),
            policy=self.policy,
            persistent=self.persistent,
            writable=self.writable,
            version=self.version,
            from_partition=self.from_partition,
            owner=self.owner,
        )


@dataclass(frozen=True)
class IdRange:
    """The global IDs ``[start, end)`` this partition owns in one ID space, out of ``total``."""

    start: int
    end: int
    total: int

    @property
    def size(self) -> int:
        return self.end - self.start


class TensorStore:
    """The named tensors of one partition.

    Args:
        part_id: this partition's index (error messages, per-partition init seeds).
        node_range, edge_range: the node and edge IDs this partition owns.
        gatherer: how pulls gather rows (default: split large pulls across the usable CPUs).
    """

    def __init__(
        self,
        part_id: int,
        node_range: IdRange,
        edge_range: IdRange,
        gatherer: RowGatherer | None = None,
    ) -> None:
        self.part_id = part_id
        self._ranges = {NODE: node_range, EDGE: edge_range}
        self._tensors: dict[str, StoredTensor] = {}
        self._registry_lock = threading.Lock()
        self._gatherer = gatherer if gatherer is not None else RowGatherer()

    def close(self) -> None:
        """Stop the gather threads (a later large pull starts them again)."""
        self._gatherer.close()

    # -- lookup ---------------------------------------------------------------------------------

    def id_range(self, policy: str) -> IdRange:
        """The owned ID range of ``policy`` (``"node"``/``"edge"``).

        Raises:
            ValueError: for another policy.
        """
        try:
            return self._ranges[policy]
        except KeyError:
            raise ValueError(f"policy must be 'node' or 'edge', got {policy!r}") from None

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
            policy: ``"node"`` or ``"edge"``.
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
        with self._registry_lock:
            if name in self._tensors:
                raise FileExistsError(f"tensor {name!r} already exists on partition {self.part_id}")
            self._tensors[name] = tensor

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
            policy: ``"node"`` or ``"edge"``.
            persistent: kept when its creator releases it.
            init: how the rows start; random kinds draw from ``init.seed + part_id``.
            owner: the creating client's id.

        Returns:
            ``(True, scheme)`` when created, ``(False, scheme)`` when attached.

        Raises:
            ValueError: empty name, bad shape / dtype / policy / initializer.
            FileExistsError: ``name`` exists with another shape, dtype or policy.
            MemoryError: the rows would not fit in this host's available memory.
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
                f"shape: shape[0] of a {policy} tensor must be the number of {policy}s "
                f"({id_range.total}), got {list(shape)}"
            )
        if any(d <= 0 for d in shape[1:]):
            raise ValueError(f"shape: row dimensions must be positive, got {list(shape)}")
        if init.kind not in INITIALIZERS:
            raise ValueError(f"init.kind must be one of {INITIALIZERS}, got {init.kind!r}")
        with self._registry_lock:
            existing = self._tensors.get(name)
            if existing is not None:
                return False, self._attach(existing, shape, dtype, policy)
        local_shape = (id_range.size, *shape[1:])
        itemsize = dtypes.info(dtype).storage.itemsize
        nbytes = int(np.prod(local_shape, dtype=object)) * itemsize
        available = _available_memory_bytes()
        if available is not None and nbytes > available:
            raise MemoryError(
                f"shape: tensor {name!r} of shape {list(shape)} needs {nbytes} bytes on partition "
                f"{self.part_id}, more than the {available} bytes available"
            )
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
        with self._registry_lock:
            existing = self._tensors.get(name)
            if existing is not None:  # created concurrently by another client
                return False, self._attach(existing, shape, dtype, policy)
            self._tensors[name] = tensor
        logger.info("created tensor %r %s %s (%s, init=%s)", name, dtype, list(shape), policy, init.kind)
        return True, tensor.scheme()

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


def scatter_add(data: np.ndarray, local: np.ndarray, rows: np.ndarray, dtype: str) -> None:
    """``data[local] += rows`` summing repeated indices, in a wide enough dtype for 16-bit floats.

    Args:
        data: storage array to update in place.
        local: int64 local row indices (may repeat).
        rows: values in storage form, ``rows.shape == (len(local), *data.shape[1:])``.
        dtype: canonical dtype name of ``data``.
    """
    if len(local) == 0:
        return
    uniq, inverse = np.unique(local, return_inverse=True)
    if len(uniq) == len(local) and dtype not in ("bfloat16", "float16"):
        data[local] += rows
        return
    acc = _widen(data[uniq], dtype)
    np.add.at(acc, inverse, _widen(rows, dtype))
    data[uniq] = _narrow(acc, dtype)
