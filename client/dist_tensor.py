"""DistTensor: a tensor sharded by rows over the partition servers, read and written by global IDs.

Follows ``dgl.distributed.DistTensor``. A read or write is split by owning partition
(:func:`~graphstore.client.routing.split_by_partition`), the per-partition requests run concurrently
on the context's pool, and the answers are put back in request order. Rows of read-only data loaded
from the partition files are read straight from the co-located partition's mapped files when the
context has one; everything writable always goes through its server, so no reader sees a stale row.

Lifetime: the first creator of a name initializes it (``init_func`` once per partition it creates, the
rows pushed to the server; or a server-side :class:`~graphstore.types.InitSpec`); later
``DistTensor`` objects with the same name, shape and dtype attach without touching the rows. A
non-persistent tensor is deleted on the servers when the object that created it is collected or when
its client exits; persistent ones live until :meth:`DistTensor.delete` or until the servers stop.
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Callable, Sequence

import numpy as np
import torch

from graphstore import dtypes
from graphstore.client.buffers import RowBufferPool
from graphstore.client.context import ClientContext, get_context
from graphstore.client.routing import last_occurrence, normalize_index, split_by_partition, whole_answer
from graphstore.client.tensor_creation import check_shape, create_on_servers, resolve_policy
from graphstore.client.tensor_reads import fill_from_carried, partition_reader, read_routes
from graphstore.errors import ServerError
from graphstore.partition import PartitionPolicy
from graphstore.protos.edges_wire import CarriedRows
from graphstore.types import InitSpec, TensorScheme

logger = logging.getLogger(__name__)

WRITE_OPS = ("assign", "add")


class DistTensor:
    """A distributed tensor whose first dimension is the graph's nodes or edges.

    Args:
        shape: global shape; ``shape[0]`` is the number of nodes or edges.
        dtype: torch / numpy dtype or its name (float32, float16, bfloat16, float64, int8/16/32/64,
            uint8, bool).
        name: the tensor's name on the cluster; None: a name unique to this client.
        init_func: how the first creator fills the rows: a callable ``init_func(part_shape, dtype) ->
            torch.Tensor`` called once per partition (the rows are pushed to its server), or an
            :class:`~graphstore.types.InitSpec` that the servers run themselves; None: zeros.
        part_policy: ``'node'`` / ``'edge'`` (or ``'node:_N'`` / ``'edge:_E'`` or a PartitionPolicy);
            None: inferred from ``shape[0]``.
        persistent: keep the tensor after its creator releases it.

    Raises:
        RuntimeError: no client context (call ``initialize()`` or open a standalone DistGraph).
        ValueError: a bad shape, an ambiguous or mismatching policy, a persistent tensor without a
            name, or a name that exists with another shape / dtype (the message names both).
        TypeError: an unsupported dtype or ``init_func``.
    """

    def __init__(
        self,
        shape,
        dtype,
        name: str | None = None,
        init_func: Callable | InitSpec | None = None,
        part_policy=None,
        persistent: bool = False,
    ):
        ctx = get_context()
        shape = check_shape(shape)
        try:
            dtype_name = dtypes.name_of(dtype)
        except ValueError as exc:
            raise TypeError(str(exc)) from None
        policy = resolve_policy(part_policy, shape[0], ctx)
        if name is None:
            if persistent:
                raise ValueError("a persistent DistTensor needs a name (persistent=True, name=None)")
            name = ctx.anonymous_name()
        elif not isinstance(name, str) or not name:
            raise ValueError(f"name must be a non-empty string, got {name!r}")
        if init_func is None:
            spec, fill = InitSpec("zeros"), None
        elif isinstance(init_func, InitSpec):
            spec, fill = init_func, None
        elif callable(init_func):
            spec, fill = InitSpec("pushed"), init_func
        else:
            raise TypeError(f"init_func must be a callable or an InitSpec, got {type(init_func).__name__}")
        created, scheme = create_on_servers(ctx, name, shape, dtype_name, policy, bool(persistent), spec)
        self._setup(ctx, scheme)
        self._owner = any(created)
        if fill is not None and any(created):
            self._fill(fill, [p for p, was_created in enumerate(created) if was_created])
        if self._owner and not self._persistent:
            self._finalizer = weakref.finalize(self, _release, ctx, name)
            self._finalizer.atexit = False  # exit_client() deletes what is left, with the context still open
            ctx.register_owned(name, self._finalizer)

    # ----- construction helpers ----------------------------------------------------------------

    @classmethod
    def attach(cls, name: str, ctx: ClientContext | None = None) -> DistTensor:
        """A handle on the existing tensor ``name``, whatever its shape and dtype (never touches rows).

        Raises:
            KeyError: when no server has a tensor of that name.
        """
        ctx = ctx or get_context()
        scheme = ctx.tensor_scheme(name) or ctx.tensor_scheme(name, refresh=True)
        if scheme is None:
            raise KeyError(f"no DistTensor named {name!r} on graph {ctx.graph_name!r}")
        return cls._from_scheme(ctx, scheme)

    @classmethod
    def _from_scheme(cls, ctx: ClientContext, scheme: TensorScheme) -> DistTensor:
        tensor = cls.__new__(cls)
        tensor._setup(ctx, scheme)
        tensor._owner = False
        return tensor

    def _setup(self, ctx: ClientContext, scheme: TensorScheme) -> None:
        self._ctx = ctx
        self._scheme = scheme
        self._name = scheme.name
        self._shape = tuple(int(s) for s in scheme.shape)
        self._row_shape = self._shape[1:]
        self._dtype_name = scheme.dtype
        self._storage_dtype = dtypes.info(scheme.dtype).storage
        self._torch_dtype = dtypes.torch_dtype(scheme.dtype)
        self._policy_kind = scheme.policy
        self._persistent = bool(scheme.persistent)
        self._writable = bool(scheme.writable)
        # Read-only data from the partition files is the same bytes in the files as on the server.
        self._local_reads = bool(scheme.from_partition) and not self._writable
        self._owner = False
        self._finalizer = None

    def _fill(self, init_func: Callable, parts: list[int]) -> None:
        """Run ``init_func`` for each partition this client created and push the rows.

        Partitions are filled one after the other in partition order, in this thread, so a seeded
        ``init_func`` gives the same rows every run and only one partition's rows are held at a time.
        """
        bounds = self._ctx.bounds(self._policy_kind)

        def fill_one(part_id: int) -> None:
            start, end = int(bounds[part_id]), int(bounds[part_id + 1])
            if end == start:
                return
            rows = init_func((end - start, *self._row_shape), self._torch_dtype)
            if not isinstance(rows, torch.Tensor):
                rows = torch.as_tensor(np.asarray(rows))
            if tuple(rows.shape) != (end - start, *self._row_shape):
                raise ValueError(
                    f"init_func returned shape {tuple(rows.shape)} for partition {part_id} of "
                    f"{self._name!r}; expected {(end - start, *self._row_shape)}"
                )
            storage, _ = dtypes.from_torch(rows.to(self._torch_dtype))
            self._ctx.partition(part_id).push(
                self._name, np.arange(start, end, dtype=np.int64), storage, "assign"
            )

        for part_id in parts:
            fill_one(part_id)

    # ----- metadata ----------------------------------------------------------------------------

    @property
    def shape(self) -> tuple[int, ...]:
        """The global shape."""
        return self._shape

    @property
    def dtype(self) -> torch.dtype:
        """The torch dtype of the rows."""
        return self._torch_dtype

    @property
    def name(self) -> str:
        """The name on the cluster."""
        return self._name

    @property
    def part_policy(self):
        """The :class:`~graphstore.partition.PartitionPolicy` of the rows."""
        return PartitionPolicy(self._policy_kind, self._ctx.book)

    @property
    def persistent(self) -> bool:
        """Whether the tensor outlives its creator."""
        return self._persistent

    @property
    def writable(self) -> bool:
        """Whether rows may be written (False for features loaded read-only from the partition files)."""
        return self._writable

    @property
    def scheme(self) -> TensorScheme:
        """The server-side scheme as of creation / attach time."""
        return self._scheme

    def __len__(self) -> int:
        return self._shape[0]

    def __reduce__(self):
        """Pickling (``torch.save``) writes the tensor's name, shape and dtype, not its rows, as DGL does;
        unpickling in a process connected to the same graph attaches to the tensor of that name (a
        handle that never deletes it). See :func:`attach_pickled`."""
        return attach_pickled, (type(self), self._name, self._shape, self._dtype_name)

    def __repr__(self) -> str:
        return (
            f"DistTensor(name={self._name!r}, shape={self._shape}, dtype={self._torch_dtype}, "
            f"policy={self._policy_kind!r}, persistent={self._persistent}, writable={self._writable})"
        )

    # ----- reads -------------------------------------------------------------------------------

    def __getitem__(self, index) -> torch.Tensor:
        """Rows at ``index`` (int, slice, list, numpy / torch IDs or a bool mask), in request order.

        A single integer gives a ``[1, ...]`` result, as DGL does.
        """
        return self.read(index)

    def read(
        self,
        index,
        *,
        dtype=None,
        device=None,
        buffers: RowBufferPool | None = None,
        carried: Sequence[CarriedRows] = (),
    ) -> torch.Tensor:
        """Rows at ``index``, optionally cast to ``dtype`` and moved to ``device`` on the client.

        Args:
            index: as for ``t[index]``.
            dtype: cast the rows (e.g. bfloat16 features to float32); None keeps the stored dtype.
            device: move the rows there; None keeps them on the CPU.
            buffers: recycle large results' memory from this pool (the loaders do); None allocates.
            carried: rows of this tensor that arrived with a sampling answer (the loaders pass them):
                those IDs are not read again.

        Returns:
            A tensor ``[len(ids), *shape[1:]]``.

        Raises:
            IndexError: an ID out of range or a mask of the wrong length.
            TypeError: a float or otherwise unsupported index.
            KeyError: the tensor no longer exists on the servers.
            graphstore.errors.ServerUnavailableError: a server that does not answer.
        """
        ids = normalize_index(index, self._shape[0], what=f"index into DistTensor {self._name!r}")
        rows = dtypes.to_torch(self.pull_storage(ids, buffers, carried), self._dtype_name)
        if dtype is not None:
            rows = rows.to(dtypes.torch_dtype(dtypes.name_of(dtype)))
        if device is not None:
            rows = rows.to(device)
        return rows

    def pull_storage(
        self, ids: np.ndarray, buffers: RowBufferPool | None = None, carried: Sequence[CarriedRows] = ()
    ) -> np.ndarray:
        """Rows for checked int64 ``ids`` as a writable numpy storage array (bfloat16 as uint16); a
        result assembled from several partitions is placed in memory from ``buffers`` when given. Rows
        in ``carried`` (rows of this tensor that came with a sampling answer) are taken from there, and
        only the others are read."""
        if ids.size == 0:
            return np.empty((0, *self._row_shape), dtype=self._storage_dtype)
        ctx = self._ctx
        bounds = ctx.bounds(self._policy_kind)
        out = None
        if carried:
            out = self._empty(ids.size, buffers)
            missing = fill_from_carried(ids, carried, out)
            routes = [(p, missing[pos], sub) for p, pos, sub in split_by_partition(ids[missing], bounds)]
        else:
            routes = split_by_partition(ids, bounds)
        targets = [
            (partition_reader(ctx, part_id, self._local_reads), positions, part_ids)
            for part_id, positions, part_ids in routes
        ]
        if out is None and len(targets) == 1:
            # One partition holds every ID (a single route keeps the request order): no reassembly.
            target, _, part_ids = targets[0]
            return whole_answer(target.pull(self._name, part_ids), ids.size, self._row_shape)
        if out is None:
            out = self._empty(ids.size, buffers)
        read_routes(ctx, out, self._name, targets, self._row_bytes())
        return out

    def _empty(self, num_rows: int, buffers: RowBufferPool | None) -> np.ndarray:
        if buffers is not None:
            return buffers.empty(num_rows, self._row_shape, self._storage_dtype)
        return np.empty((num_rows, *self._row_shape), dtype=self._storage_dtype)

    def count_nonzero(self) -> int:
        """Number of rows with a nonzero first element (e.g. the size of a boolean mask)."""
        return self.count_in_chunks(lambda rows: np.count_nonzero(rows.reshape(rows.shape[0], -1)[:, 0]))

    def count_in_chunks(self, count: Callable[[np.ndarray], int]) -> int:
        """Sum of ``count(rows)`` over every row, pulled a message-sized chunk at a time.

        Args:
            count: called with each chunk of rows in storage form (bfloat16 as uint16 bits).
        """
        total = 0
        step = max(1, self._ctx.policy.chunk_bytes // max(1, self._row_bytes()))
        for start in range(0, self._shape[0], step):
            rows = self.pull_storage(np.arange(start, min(start + step, self._shape[0]), dtype=np.int64))
            total += int(count(rows))
        return total

    def _row_bytes(self) -> int:
        return int(np.prod(self._row_shape, dtype=np.int64)) * self._storage_dtype.itemsize

    # ----- writes ------------------------------------------------------------------------------

    def __setitem__(self, index, rows) -> None:
        """Assign ``rows`` to the rows at ``index``; with duplicate IDs the last row given wins."""
        self.write(index, rows)

    def write(self, index, rows, op: str = "assign") -> None:
        """Write rows: ``op="assign"`` replaces them, ``op="add"`` adds to them (duplicates summed).

        Args:
            index: as for ``t[index]``.
            rows: a torch tensor or numpy array ``[len(ids), *shape[1:]]`` of this tensor's dtype (for a
                single integer index, one row ``shape[1:]`` also works).
            op: ``"assign"`` or ``"add"``.

        Raises:
            PermissionError: the tensor is read-only.
            ValueError: rows of the wrong shape, or an unknown ``op``.
            TypeError: rows of another dtype, or not a tensor / array.
            IndexError: an ID out of range.
        """
        if op not in WRITE_OPS:
            raise ValueError(f"op must be one of {WRITE_OPS}, got {op!r}")
        if not self._writable:
            raise PermissionError(
                f"DistTensor {self._name!r} is read-only (loaded from the partition files); "
                "start the servers with --writable-features to write it"
            )
        ids = normalize_index(index, self._shape[0], what=f"index into DistTensor {self._name!r}")
        scalar = isinstance(index, (int, np.integer)) and not isinstance(index, (bool, np.bool_))
        if scalar and isinstance(rows, (torch.Tensor, np.ndarray)) and tuple(rows.shape) == self._row_shape:
            rows = rows[None]  # t[5] = row
        tensor = self._check_rows(rows, ids.size)
        if ids.size == 0:
            return
        if op == "assign":
            keep = last_occurrence(ids)
            if keep is not None:
                ids, tensor = ids[keep], tensor[torch.from_numpy(keep)]
        else:
            if self._dtype_name == "bool":
                raise ValueError(f"op='add' is not defined for the bool DistTensor {self._name!r}")
            unique, inverse = np.unique(ids, return_inverse=True)
            if unique.size < ids.size:
                summed = torch.zeros((unique.size, *self._row_shape), dtype=tensor.dtype)
                summed.index_add_(0, torch.from_numpy(inverse.reshape(-1)), tensor)
                ids, tensor = unique, summed
        storage, _ = dtypes.from_torch(tensor)
        ctx = self._ctx
        calls = [
            lambda p=part_id, i=part_ids, r=storage[positions]: ctx.partition(p).push(self._name, i, r, op)
            for part_id, positions, part_ids in split_by_partition(ids, ctx.bounds(self._policy_kind))
        ]
        ctx.run_parallel(calls)

    def _check_rows(self, rows, num_ids: int) -> torch.Tensor:
        if isinstance(rows, np.ndarray):
            try:
                name = dtypes.name_of(rows.dtype)
            except ValueError:
                raise TypeError(f"rows have unsupported dtype {rows.dtype}") from None
            tensor = dtypes.to_torch(rows, name)
        elif isinstance(rows, torch.Tensor):
            tensor = rows.detach()
            if tensor.device.type != "cpu":
                tensor = tensor.cpu()
        else:
            raise TypeError(f"rows must be a torch tensor or numpy array, got {type(rows).__name__}")
        if tensor.dtype != self._torch_dtype:
            raise TypeError(
                f"rows have dtype {tensor.dtype} but DistTensor {self._name!r} has dtype "
                f"{self._torch_dtype}; cast them first"
            )
        expected = (num_ids, *self._row_shape)
        if tuple(tensor.shape) != expected:
            raise ValueError(
                f"rows have shape {tuple(tensor.shape)} but {num_ids} rows of DistTensor {self._name!r} "
                f"need shape {expected}"
            )
        return tensor.contiguous()

    # ----- lifetime ----------------------------------------------------------------------------

    def delete(self) -> bool:
        """Delete the tensor on every server now (persistent or not); returns whether it existed.

        Raises:
            PermissionError: for data loaded from the partition files.
        """
        if self._scheme.from_partition:
            raise PermissionError(
                f"DistTensor {self._name!r} was loaded from the partition files and cannot be deleted"
            )
        if self._finalizer is not None:
            self._finalizer.detach()
            self._finalizer = None
        self._ctx.unregister_owned(self._name)
        return self._ctx.delete_everywhere(self._name)


def attach_pickled(cls: type, name: str, shape: tuple, dtype_name: str) -> DistTensor:
    """A pickled DistTensor (``torch.load`` / ``pickle.loads``): a handle on the tensor ``name`` of the
    graph this process is connected to.

    Args:
        cls: the class that was pickled (a subclass keeps its type).
        name, shape, dtype_name: what was pickled.

    Returns:
        The handle (it reads and writes the rows; it never deletes the tensor).

    Raises:
        RuntimeError: no client context (call ``initialize()`` / open the DistGraph before loading).
        KeyError: no tensor of that name on the cluster (a non-persistent tensor is deleted when its
            creator releases it).
        ValueError: a tensor of that name with another shape or dtype.
    """
    tensor = cls.attach(name)
    if tensor.shape != tuple(shape) or tensor._dtype_name != dtype_name:
        raise ValueError(
            f"the pickled DistTensor {name!r} was {tuple(shape)} {dtype_name}; the cluster's is "
            f"{tensor.shape} {tensor._dtype_name}"
        )
    return tensor


def _release(ctx: ClientContext, name: str) -> None:
    """Delete a non-persistent tensor whose creating object was released (weakref finalizer)."""
    ctx.unregister_owned(name)
    if ctx.closed:
        return
    try:
        ctx.delete_everywhere(name)
    except (ServerError, RuntimeError, OSError) as exc:
        logger.warning("could not delete released DistTensor %r: %s", name, exc)
