"""One partition as plain Python objects: :class:`PartitionServer` implements ``PartitionAPI``.

The gRPC servicer (:mod:`graphstore.server.servicer`) is a thin layer over this class, and the
client's standalone mode and co-located reads call it in-process, so every behaviour (range checks,
locking, error types) is defined once, here and in the modules it composes:

- :mod:`~graphstore.server.tensor_store`: named tensors, locks, versions, global -> local IDs;
- :mod:`~graphstore.server.sampler`: vectorized neighbor sampling and structure queries;
- :mod:`~graphstore.server.optimizer`: sparse optimizer state beside the rows;
- :mod:`~graphstore.server.barrier`: named barriers;
- :mod:`~graphstore.server.durability.checkpoint`: checkpoint / restore keyed by original IDs;
- :mod:`~graphstore.server.durability.checkpoint_set`: cluster-wide checkpoints as one consistent set.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections import Counter
from collections.abc import Sequence

import numpy as np

from graphstore.dtypes import bfloat16_bits_to_float32
from graphstore.ids import as_id_array
from graphstore.limits import RequestLimits
from graphstore.partition.types import PartitionData
from graphstore.server.barrier import BarrierRegistry
from graphstore.server.durability import checkpoint_set
from graphstore.server.durability.checkpoint import OptimizerHooks, restore_checkpoint, save_checkpoint
from graphstore.server.durability.checkpoint_root import CheckpointRoot
from graphstore.server.gather import RowGatherer
from graphstore.server.host_memory import read_rss_bytes
from graphstore.server.memory_budget import MemoryBudget
from graphstore.server.optimizer import SparseOptimizerState
from graphstore.server.partition_tensors import id_ranges, original_ids, partition_tensors
from graphstore.server.structure import PartitionStructure, check_edge_dir
from graphstore.server.tensor_store import TensorStore
from graphstore.types import (
    EDGE,
    NODE,
    InitSpec,
    OptimizerConfig,
    PartitionMetadata,
    ServerStats,
    TensorScheme,
)

logger = logging.getLogger(__name__)


class PartitionServer:
    """The data and operations of one partition (see :class:`graphstore.types.PartitionAPI`).

    Args:
        partition: the loaded partition (arrays memory-mapped).
        writable_features: copy the partition's features into memory and allow writes to them.
        read_only_view: expose only the partition's read-only data (features and structure), as a
            co-located client does in-process; every write and every run-time tensor operation
            raises PermissionError.
        gather_threads: threads per large pull (see :class:`~graphstore.server.gather.RowGatherer`);
            None: the usable CPUs, at most 4.
        limits: the bounds of barrier waits and the memory margin of new tensors (default: the
            defaults of :class:`~graphstore.limits.RequestLimits`).
        checkpoint_root: the folder the names of clients' checkpoints live under (default:
            ``checkpoints/`` beside the partition config); :meth:`checkpoint` and :meth:`restore`
            themselves take folder paths (the servicer and the standalone transport resolve names).
        barrier_holders: barrier calls that may be held waiting for their release at once (a server
            keeps most of its worker threads free for other calls).

    Raises:
        ValueError: both ``writable_features`` and ``read_only_view``.
    """

    def __init__(
        self,
        partition: PartitionData,
        *,
        writable_features: bool = False,
        read_only_view: bool = False,
        gather_threads: int | None = None,
        limits: RequestLimits | None = None,
        checkpoint_root: str | None = None,
        barrier_holders: int = 4,
    ) -> None:
        if writable_features and read_only_view:
            raise ValueError("writable_features and read_only_view exclude each other")
        limits = limits if limits is not None else RequestLimits()
        self.part_id = int(partition.part_id)
        self._partition = partition
        self._read_only_view = read_only_view
        self.checkpoint_root = (
            CheckpointRoot(checkpoint_root)
            if checkpoint_root
            else CheckpointRoot.for_partition(partition.config_path)
        )
        book = partition.book
        self._book = book
        self._node_bounds = tuple(int(b) for b in np.asarray(book.node_bounds))
        self._edge_bounds = tuple(int(b) for b in np.asarray(book.edge_bounds))
        self._store = TensorStore(
            self.part_id,
            id_ranges(book, self.part_id),
            RowGatherer(threads=gather_threads),
            MemoryBudget(limits.memory_margin_bytes),
        )
        for policy, name, array, scheme in partition_tensors(partition):
            self._store.add_partition_tensor(name, array, scheme.dtype, policy, writable_features)
        self._structure = PartitionStructure(partition)
        self._optimizer = SparseOptimizerState()
        self._barriers = BarrierRegistry(
            limits.max_barrier_timeout_s, limits.max_barrier_waiters, max_holders=barrier_holders
        )
        self._started = time.monotonic()
        self._counters: Counter[str] = Counter()
        self._counter_lock = threading.Lock()
        self.address = ""

    # -- helpers ---------------------------------------------------------------------------------

    @property
    def partition(self) -> PartitionData:
        """The loaded partition."""
        return self._partition

    @property
    def book(self):
        """The partition book (every partition's ID ranges)."""
        return self._book

    @property
    def store(self) -> TensorStore:
        """The named tensors (for in-process callers such as benchmarks and tests)."""
        return self._store

    def _count(self, key: str, amount: int = 1) -> None:
        with self._counter_lock:
            self._counters[key] += amount

    def _writes_allowed(self, what: str) -> None:
        if self._read_only_view:
            raise PermissionError(
                f"{what}: this is a read-only view of partition {self.part_id}; writes go to its server"
            )

    def _local_nodes(self, ids: np.ndarray, arg: str) -> np.ndarray:
        return self._store.to_local(NODE, ids, arg)

    def _optimizer_hooks(self) -> OptimizerHooks:
        return OptimizerHooks(
            kind=self._optimizer.kind,
            state_arrays=self._optimizer.state_arrays,
            load_state_arrays=self._optimizer.load_state_arrays,
        )

    # -- metadata --------------------------------------------------------------------------------

    def metadata(self) -> PartitionMetadata:
        """The graph's name, ranges and this partition's tensor schemes."""
        p = self._partition
        return PartitionMetadata(
            graph_name=p.graph_name,
            part_id=self.part_id,
            num_parts=len(self._node_bounds) - 1,
            num_nodes=self._node_bounds[-1],
            num_edges=self._edge_bounds[-1],
            node_bounds=self._node_bounds,
            edge_bounds=self._edge_bounds,
            schema=p.schema,
            ntype_counts=tuple(int(c) for c in np.asarray(self._book.ntype_counts).reshape(-1)),
            etype_counts=tuple(int(c) for c in np.asarray(self._book.etype_counts).reshape(-1)),
            tensors=tuple(self.list_tensors()),
            part_config=p.config_path,
            hostname=socket.gethostname(),
            checkpoint_root=self.checkpoint_root.root,
            read_replica=self._read_only_view,
        )

    def stats(self) -> ServerStats:
        """Uptime, memory and request counters."""
        rss, rss_anon = read_rss_bytes()
        with self._counter_lock:
            counters = dict(self._counters)
        return ServerStats(
            part_id=self.part_id,
            uptime_s=time.monotonic() - self._started,
            rss_bytes=rss,
            rss_anon_bytes=rss_anon,
            tensors=tuple(self.list_tensors()),
            counters=counters,
            address=self.address,
            read_replica=self._read_only_view,
        )

    # -- named tensors ---------------------------------------------------------------------------

    def pull(self, name: str, ids: np.ndarray) -> np.ndarray:
        """Rows of ``name`` for global ``ids`` owned here, in request order (storage form).

        Raises:
            KeyError: unknown tensor.
            ValueError: an ID not owned by this partition.
        """
        rows = self._store.pull(name, ids)
        self._count("pull_rows", len(rows))
        return rows

    def pull_into(self, name: str, ids: np.ndarray, out: np.ndarray) -> np.ndarray:
        """:meth:`pull` into a given array of shape ``(len(ids), *row_shape)`` and the storage dtype.

        Raises:
            KeyError: unknown tensor.
            ValueError: an ID not owned here, or ``out`` of the wrong shape or dtype.
        """
        rows = self._store.pull(name, ids, out=out)
        self._count("pull_rows", len(rows))
        return rows

    def push(self, name: str, ids: np.ndarray, rows: np.ndarray, op: str = "assign") -> int:
        """Assign or add rows, atomically per request; returns the tensor's new version.

        Raises:
            KeyError: unknown tensor.
            PermissionError: a read-only tensor, or a read-only view.
            ValueError: bad op, IDs, dtype or shape.
        """
        self._writes_allowed("push")
        version = self._store.push(name, ids, rows, op)
        self._count("push_rows", len(rows))
        return version

    def init_tensor(
        self,
        name: str,
        shape: tuple[int, ...],
        dtype: str,
        policy: str,
        persistent: bool = False,
        init: InitSpec = InitSpec(),
        owner: str = "",
    ) -> tuple[bool, TensorScheme]:
        """Create a tensor or attach to an identical one (see :meth:`TensorStore.init`).

        Raises:
            ValueError: bad name, shape, dtype, policy or initializer.
            FileExistsError: the name exists with another scheme.
            PermissionError: a read-only view.
            MemoryError: the rows do not fit in memory.
        """
        self._writes_allowed("init_tensor")
        return self._store.init(name, tuple(shape), dtype, policy, persistent, init, owner)

    def delete_tensor(self, name: str) -> bool:
        """Delete a run-time tensor and its optimizer state; False when it does not exist.

        Raises:
            PermissionError: a partition tensor, or a read-only view.
        """
        self._writes_allowed("delete_tensor")
        deleted = self._store.delete(name)
        if deleted:
            self._optimizer.drop(name)
        return deleted

    def tensor_scheme(self, name: str) -> TensorScheme:
        """The scheme of one tensor.

        Raises:
            KeyError: unknown tensor.
        """
        return self._store.get(name).scheme()

    def list_tensors(self) -> list[TensorScheme]:
        """Schemes of every tensor, sorted by name."""
        return self._store.schemes()

    # -- structure -------------------------------------------------------------------------------

    def sample_neighbors(
        self,
        seeds: np.ndarray,
        fanout: int | Sequence[int],
        edge_dir: str = "in",
        replace: bool = False,
        prob: str | Sequence[str | None] | None = None,
        random_seed: int | None = None,
        exclude_eids: np.ndarray | None = None,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Sample edges around seeds owned here; returns homogeneous ``(src, dst, eid)``, grouped by
        edge type in type-ID order (the type of each edge follows from its ID).

        Args:
            seeds: homogeneous node IDs owned by this partition.
            fanout: edges per seed, -1 for all; on a typed graph also one value per edge type (0 skips
                a type).
            edge_dir: ``"in"`` (edges pointing to the seeds) or ``"out"``.
            replace: with replacement.
            prob: name of an edge tensor of non-negative weights (``edge_dir="in"`` only: the in-edges
                of the seeds are the edges this partition owns); on a typed graph one name (or None)
                per edge type.
            random_seed: makes the sample reproducible.
            exclude_eids: homogeneous edge IDs never drawn: a seed samples among its other edges, so it
                still gets ``min(fanout, degree without them)`` edges.

        Raises:
            ValueError: bad seeds, fanout < -1, bad edge_dir, a prob tensor that is not a 1-column
                tensor of that edge type or holds negative weights, or ``prob`` with ``edge_dir="out"``.
            KeyError: unknown prob tensor.
        """
        local = self._local_nodes(seeds, "seeds")
        weights = None
        if prob:
            if edge_dir == "out":
                raise ValueError(
                    f"prob: edge weights ({prob!r}) are supported for edge_dir='in' only; a partition owns "
                    "the in-edges of its nodes, not their out-edges"
                )
            weights = self._edge_weights(prob)
        exclude = None
        if exclude_eids is not None:
            exclude = np.unique(as_id_array(exclude_eids, "exclude_eids", one_dim=True))
        edges = self._structure.sample(
            local, fanout, edge_dir, replace, weights, np.random.default_rng(random_seed), exclude
        )
        self._count("sampled_seeds", len(local))
        return edges.src, edges.dst, edges.eid

    def _edge_weights(self, prob: str | Sequence[str | None]) -> list[np.ndarray | None]:
        """Per edge type, a weight per local edge position (zeros outside the type), or None.

        The tensors hold one row per local edge ID: where the IDs are not the positions (the
        partition's ``in_eid``), the rows are put in position order.
        """
        structure = self._structure
        names = [prob] * structure.num_etypes if isinstance(prob, str) else list(prob)
        if len(names) != structure.num_etypes:
            raise ValueError(f"prob: {len(names)} names given for {structure.num_etypes} edge types")
        weights: list[np.ndarray | None] = []
        for e, name in enumerate(names):
            if not name:
                weights.append(None)
                continue
            tensor = self._store.get(name)
            schema = self._partition.schema
            expected = EDGE if structure.homogeneous else schema.edge_policy(schema.canonical_etypes[e])
            if tensor.policy not in (expected, EDGE):
                raise ValueError(
                    f"prob: tensor {name!r} is a {tensor.policy} tensor; sampling weights of edge type "
                    f"{e} must be per edge ({expected})"
                )
            if tensor.data.ndim > 2 or (tensor.data.ndim == 2 and tensor.data.shape[1] != 1):
                raise ValueError(
                    f"prob: tensor {name!r} must have one weight per edge, got row shape {tensor.row_shape}"
                )
            values = tensor.data.reshape(-1)
            if tensor.dtype == "bfloat16":
                values = bfloat16_bits_to_float32(values)
            elif tensor.dtype == "bool":
                values = values.astype(np.float64)
            if tensor.policy == EDGE or structure.homogeneous:
                full = values
            else:  # rows of one edge type: place them at the type's local IDs
                full = np.zeros(self._partition.num_local_edges, dtype=values.dtype)
                lo, hi = structure.etype_offsets[e], structure.etype_offsets[e + 1]
                full[lo:hi] = values
            in_eid = self._partition.in_eid
            weights.append(full if in_eid is None else full[np.asarray(in_eid)])
        return weights

    def find_edges(self, eids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Homogeneous ``(src, dst)`` of edges owned by this partition.

        Raises:
            ValueError: an edge ID not owned here.
        """
        return self._structure.find_edges(self._store.to_local(EDGE, eids, "eids"))

    def in_subgraph(self, nodes: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Every in-edge of ``nodes`` (owned here) as homogeneous ``(src, dst, eid)``, grouped by edge type.

        Raises:
            ValueError: a node not owned here.
        """
        edges = self._structure.in_edges(self._local_nodes(nodes, "nodes"))
        return edges.src, edges.dst, edges.eid

    def degrees(self, nids: np.ndarray, edge_dir: str = "in", etype: int | None = None) -> np.ndarray:
        """In- or out-degrees (int64) of nodes owned here, over every edge type or over type ``etype``.

        Raises:
            ValueError: a node not owned here, a bad ``edge_dir`` or edge type ID.
        """
        check_edge_dir(edge_dir)
        if etype is not None and not 0 <= int(etype) < self._structure.num_etypes:
            raise ValueError(f"etype: edge type ID {etype} out of range [0, {self._structure.num_etypes})")
        return self._structure.degrees(self._local_nodes(nids, "nids"), edge_dir, etype)

    # -- optimizer, barrier, checkpoints ---------------------------------------------------------

    def push_grad(self, name: str, ids: np.ndarray, grads: np.ndarray, optimizer: OptimizerConfig) -> int:
        """Apply one sparse optimizer step to rows ``ids`` under the tensor's write lock.

        Args:
            name: a writable 2-D float32 tensor.
            ids: unique global IDs owned here.
            grads: float32 ``[len(ids), dim]``.
            optimizer: kind and hyper-parameters.

        Returns:
            The tensor's new version.

        Raises:
            KeyError: unknown tensor.
            PermissionError: a read-only tensor or view.
            ValueError: bad IDs, grads, optimizer kind or hyper-parameters.
        """
        self._writes_allowed("push_grad")
        tensor = self._store.get(name)
        local = self._store.to_local(tensor.policy, ids)
        with self._store.writing(name) as tensor:
            self._optimizer.apply(name, tensor.data, local, np.asarray(grads), optimizer)
            version = tensor.version + 1  # ``writing`` bumps it on exit
        self._count("push_grad_rows", len(local))
        return version

    def barrier(self, name: str, count: int, timeout_s: float, participant: str = "") -> int:
        """Block until ``count`` participants reached barrier ``name``; returns its generation.

        Raises:
            ValueError: bad count or timeout.
            TimeoutError: (BarrierTimeoutError) not everyone arrived in time.
        """
        return self._barriers.wait(name, count, timeout_s, participant)

    def barrier_arrive(
        self, name: str, count: int, timeout_s: float, participant: str, ticket: int | None, hold_s: float
    ) -> tuple[bool, int]:
        """Arrive at (or poll) barrier ``name`` without waiting for the others (the servicer's way,
        see :meth:`BarrierRegistry.arrive <graphstore.server.barrier.BarrierRegistry.arrive>`).

        Returns:
            ``(released, generation)``.
        """
        return self._barriers.arrive(name, count, timeout_s, participant, ticket, hold_s)

    def barrier_leave(self, name: str, participant: str) -> None:
        """Withdraw a polling participant's arrival (it gave up waiting)."""
        self._barriers.leave(name, participant)

    def close(self) -> None:
        """Release waiting barrier participants and stop the gather threads (shutdown); the data stays
        readable."""
        self._barriers.close()
        self._store.close()

    def _orig_ids(self) -> dict[str, np.ndarray]:
        return original_ids(self._partition)

    def checkpoint(
        self, path: str, names: list[str] | None = None, save_id: str | None = None
    ) -> tuple[list[str], int]:
        """Write tensors (all run-time tensors by default) and their optimizer state under ``path``:
        straight into ``path``, or as this partition's part of the cluster-wide save ``save_id``
        (:func:`~graphstore.server.durability.checkpoint_set.write_part`; then :meth:`commit_checkpoint` or
        :meth:`abort_checkpoint`).

        Returns:
            ``(files written, rows written)``.

        Raises:
            KeyError: an unknown tensor.
            PermissionError: a read-only view.
            OSError: the folder cannot be written (a save's part leaves no file behind).
        """
        self._writes_allowed("checkpoint")
        if not path:
            raise ValueError("path: a checkpoint needs a folder path")
        if not names:
            names = [s.name for s in self._store.schemes() if not s.from_partition]
        num_parts = len(self._node_bounds) - 1

        def write(folder: str) -> tuple[list[str], int]:
            return save_checkpoint(
                folder,
                self._store,
                list(names),
                graph_name=self._partition.graph_name,
                num_parts=num_parts,
                orig_ids=self._orig_ids(),
                optimizer=self._optimizer_hooks(),
            )

        if not save_id:
            return write(path)
        return checkpoint_set.write_part(path, save_id, self.part_id, num_parts, list(names), write)

    def commit_checkpoint(self, path: str, save_id: str, names: list[str]) -> None:
        """Make save ``save_id`` (every partition wrote its part) the checkpoint of ``names`` at ``path``.

        Raises:
            FileNotFoundError: this partition's part of the save is missing.
        """
        self._writes_allowed("checkpoint")
        checkpoint_set.commit(path, save_id, self.part_id, len(self._node_bounds) - 1, list(names))

    def abort_checkpoint(self, path: str, save_id: str) -> None:
        """Remove the files of the unfinished save ``save_id`` under ``path``."""
        self._writes_allowed("checkpoint")
        checkpoint_set.abort(path, save_id)

    def restore(self, path: str, names: list[str] | None = None) -> tuple[list[str], int]:
        """Load tensors and optimizer state from a checkpoint written by any number of partitions.

        Returns:
            ``(restored names, rows restored)``.

        Raises:
            FileNotFoundError: missing folder or tensor, or an incomplete checkpoint set (naming the
                missing parts).
            ValueError: another graph's checkpoint, a scheme mismatch, incomplete coverage, or a set
                mixing saves.
            PermissionError: a read-only view or tensor.
        """
        self._writes_allowed("restore")
        if not path:
            raise ValueError("path: a restore needs a folder path")
        restored: list[str] = []
        rows = 0
        for root, group in checkpoint_set.restore_roots(path, list(names) if names else None):
            done, count = restore_checkpoint(
                root,
                self._store,
                group,
                graph_name=self._partition.graph_name,
                orig_ids=self._orig_ids(),
                optimizer=self._optimizer_hooks(),
            )
            restored += done
            rows += count
        return restored, rows
