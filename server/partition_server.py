"""One partition as plain Python objects: :class:`PartitionServer` implements ``PartitionAPI``.

The gRPC servicer (:mod:`graphstore.server.servicer`) is a thin layer over this class, and the
client's standalone mode and co-located reads call it in-process, so every behaviour (range checks,
locking, error types) is defined once, here and in the modules it composes:

- :mod:`~graphstore.server.tensor_store`: named tensors, locks, versions, global -> local IDs;
- :mod:`~graphstore.server.sampler`: vectorized neighbor sampling and structure queries;
- :mod:`~graphstore.server.optimizer`: sparse optimizer state beside the rows;
- :mod:`~graphstore.server.barrier`: named barriers;
- :mod:`~graphstore.server.checkpoint`: checkpoint / restore keyed by original IDs.
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
from graphstore.partition.types import PartitionData
from graphstore.server.barrier import BarrierRegistry
from graphstore.server.checkpoint import OptimizerHooks, restore_checkpoint, save_checkpoint
from graphstore.server.gather import RowGatherer
from graphstore.server.host_memory import read_rss_bytes
from graphstore.server.id_range import IdRange
from graphstore.server.optimizer import SparseOptimizerState
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
    typed_tensor_name,
)

logger = logging.getLogger(__name__)


def _edge_feature_name(name: str, node_names: set[str]) -> str:
    """Edge features share the tensor namespace with node features; on a homogeneous graph a clashing
    edge feature is registered as ``edge:NAME``."""
    return f"edge:{name}" if name in node_names else name


def _id_ranges(book, part_id: int) -> dict[str, IdRange]:
    """The IDs this partition owns in every ID space: all nodes, all edges, and each type's."""
    schema = book.schema
    policies = [NODE, EDGE]
    if not schema.is_homogeneous:
        policies += [schema.node_policy(t) for t in schema.ntypes]
        policies += [schema.edge_policy(c) for c in schema.canonical_etypes]
    ranges = {}
    for policy in policies:
        bounds = book.policy_bounds(policy)
        ranges[policy] = IdRange(int(bounds[part_id]), int(bounds[part_id + 1]), int(bounds[-1]))
    return ranges


def _partition_tensors(partition: PartitionData):
    """``(policy, tensor name, array, scheme)`` of every feature in the partition files: plain names
    on a homogeneous graph, ``TYPE/NAME`` (DGL's ``"paper/feat"``) on a typed one."""
    schema = partition.schema
    if schema.is_homogeneous:
        node_feats = next(iter(partition.node_feats.values()), {})
        node_schemes = next(iter(partition.node_schemes.values()), {})
        for name, array in node_feats.items():
            yield NODE, name, array, node_schemes[name]
        for type_key, feats in partition.edge_feats.items():
            for name, array in feats.items():
                yield (
                    EDGE,
                    _edge_feature_name(name, set(node_feats)),
                    array,
                    partition.edge_schemes[type_key][name],
                )
        return
    for ntype, feats in partition.node_feats.items():
        for name, array in feats.items():
            yield (
                schema.node_policy(ntype),
                typed_tensor_name(ntype, name),
                array,
                partition.node_schemes[ntype][name],
            )
    for type_key, feats in partition.edge_feats.items():
        for name, array in feats.items():
            policy = schema.edge_policy(type_key)
            yield policy, typed_tensor_name(type_key, name), array, partition.edge_schemes[type_key][name]


def original_ids(partition: PartitionData) -> dict[str, np.ndarray]:
    """Original IDs of the local rows of every ID space, in local order (what checkpoints key rows by).

    Per-type spaces use the original per-type IDs. The homogeneous spaces of a typed graph use the
    original per-type ID plus the type's offset in type-ID order (the input's homogeneous ID), which
    does not depend on how the graph was partitioned.
    """
    schema, book = partition.schema, partition.book
    orig_nid, orig_eid = np.asarray(partition.orig_nid), np.asarray(partition.orig_eid)
    if schema.is_homogeneous:
        return {NODE: orig_nid, EDGE: orig_eid}
    out: dict[str, np.ndarray] = {}
    node_totals = np.array([book.num_nodes(t) for t in schema.ntypes], dtype=np.int64)
    edge_totals = np.array([book.num_edges(c) for c in schema.canonical_etypes], dtype=np.int64)
    node_shift = np.concatenate(([0], np.cumsum(node_totals)[:-1]))
    edge_shift = np.concatenate(([0], np.cumsum(edge_totals)[:-1]))
    node_counts = np.diff(partition.ntype_offsets)
    edge_counts = np.diff(partition.etype_offsets)
    out[NODE] = orig_nid + np.repeat(node_shift, node_counts)
    out[EDGE] = orig_eid + np.repeat(edge_shift, edge_counts)
    for t, ntype in enumerate(schema.ntypes):
        out[schema.node_policy(ntype)] = orig_nid[partition.ntype_offsets[t] : partition.ntype_offsets[t + 1]]
    for e, canonical in enumerate(schema.canonical_etypes):
        out[schema.edge_policy(canonical)] = orig_eid[
            partition.etype_offsets[e] : partition.etype_offsets[e + 1]
        ]
    return out


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
    ) -> None:
        if writable_features and read_only_view:
            raise ValueError("writable_features and read_only_view exclude each other")
        self.part_id = int(partition.part_id)
        self._partition = partition
        self._read_only_view = read_only_view
        book = partition.book
        self._book = book
        self._node_bounds = tuple(int(b) for b in np.asarray(book.node_bounds))
        self._edge_bounds = tuple(int(b) for b in np.asarray(book.edge_bounds))
        self._store = TensorStore(
            self.part_id, _id_ranges(book, self.part_id), RowGatherer(threads=gather_threads)
        )
        for policy, name, array, scheme in _partition_tensors(partition):
            self._store.add_partition_tensor(name, array, scheme.dtype, policy, writable_features)
        self._structure = PartitionStructure(partition)
        self._optimizer = SparseOptimizerState()
        self._barriers = BarrierRegistry()
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
        """Per edge type, a weight per local edge position (zeros outside the type), or None."""
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
                weights.append(values)
            else:  # rows of one edge type: place them at the type's local positions
                full = np.zeros(self._partition.num_local_edges, dtype=values.dtype)
                lo, hi = structure.etype_offsets[e], structure.etype_offsets[e + 1]
                full[lo:hi] = values
                weights.append(full)
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

    def close(self) -> None:
        """Release waiting barrier participants and stop the gather threads (shutdown); the data stays
        readable."""
        self._barriers.close()
        self._store.close()

    def _orig_ids(self) -> dict[str, np.ndarray]:
        return original_ids(self._partition)

    def checkpoint(self, path: str, names: list[str] | None = None) -> tuple[list[str], int]:
        """Write tensors (all run-time tensors by default) and their optimizer state under ``path``.

        Returns:
            ``(files written, rows written)``.

        Raises:
            KeyError: an unknown tensor.
            PermissionError: a read-only view.
        """
        self._writes_allowed("checkpoint")
        if not path:
            raise ValueError("path: a checkpoint needs a folder path")
        if not names:
            names = [s.name for s in self._store.schemes() if not s.from_partition]
        return save_checkpoint(
            path,
            self._store,
            list(names),
            graph_name=self._partition.graph_name,
            num_parts=len(self._node_bounds) - 1,
            orig_ids=self._orig_ids(),
            optimizer=self._optimizer_hooks(),
        )

    def restore(self, path: str, names: list[str] | None = None) -> tuple[list[str], int]:
        """Load tensors and optimizer state from a checkpoint written by any number of partitions.

        Returns:
            ``(restored names, rows restored)``.

        Raises:
            FileNotFoundError: missing folder or tensor.
            ValueError: another graph's checkpoint, a scheme mismatch, or incomplete coverage.
            PermissionError: a read-only view or tensor.
        """
        self._writes_allowed("restore")
        if not path:
            raise ValueError("path: a restore needs a folder path")
        return restore_checkpoint(
            path,
            self._store,
            list(names) if names else None,
            graph_name=self._partition.graph_name,
            orig_ids=self._orig_ids(),
            optimizer=self._optimizer_hooks(),
        )
