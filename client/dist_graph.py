"""DistGraph: the trainer's view of a partitioned graph, following ``dgl.distributed.DistGraph``.

It reads the graph's size and structure from the partitions (the co-located one in-process), exposes
node and edge data as mapping views of :class:`~graphstore.client.dist_tensor.DistTensor`, and provides
a barrier over the trainer group. In distributed mode it uses the context ``initialize()`` opened; with
no ``initialize()`` and a ``part_config`` it opens a standalone context that loads every partition
in-process (for debugging and tests).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, MutableMapping
from typing import NamedTuple

import numpy as np
import torch

from graphstore.client.constants import ANONYMOUS_PREFIX, CONFIG_ENV
from graphstore.client.context import ClientContext, current_context, standalone_context
from graphstore.client.dist_tensor import DistTensor
from graphstore.client.routing import assemble, normalize_index
from graphstore.types import DEFAULT_ETYPE, DEFAULT_NTYPE, EDGE, NODE, TensorScheme

# Edge features whose name clashes with a node feature are stored as "edge:NAME" on the servers.
_EDGE_PREFIX = "edge:"


class AttrScheme(NamedTuple):
    """Row shape and torch dtype of one node or edge feature (DGL's ``Scheme``)."""

    shape: tuple[int, ...]
    dtype: torch.dtype


class DistGraph:
    """A partitioned graph served by partition servers (or loaded in-process in standalone mode).

    Args:
        graph_name: the graph's name (as partitioned).
        gpb: a partition book; optional, checked against the servers'.
        part_config: the partition config (NAME.json); opens standalone mode when ``initialize()`` was
            not called and ``GRAPHSTORE_CONFIG`` is not set.

    Raises:
        RuntimeError: no ``initialize()``, no ``GRAPHSTORE_CONFIG`` and no ``part_config``.
        ValueError: a graph name or partition book that differs from what the servers serve.
        FileNotFoundError: a missing ``part_config`` in standalone mode.
    """

    def __init__(self, graph_name: str, gpb=None, part_config: str | None = None):
        ctx = current_context()
        if ctx is None and os.environ.get(CONFIG_ENV):
            from graphstore.client.api import initialize

            ctx = initialize()
        if ctx is None:
            if part_config is None:
                raise RuntimeError(
                    f"DistGraph({graph_name!r}): not connected; call graphstore.client.initialize() first, "
                    "or pass part_config=... for standalone mode"
                )
            ctx = standalone_context(part_config)
        if graph_name != ctx.graph_name:
            raise ValueError(
                f"graph_name {graph_name!r} does not match the graph being served, {ctx.graph_name!r}"
            )
        if gpb is not None and (
            not np.array_equal(np.asarray(gpb.node_bounds), ctx.book.node_bounds)
            or not np.array_equal(np.asarray(gpb.edge_bounds), ctx.book.edge_bounds)
        ):
            raise ValueError(f"gpb {gpb!r} does not match the servers' partition book {ctx.book!r}")
        self.graph_name = graph_name
        self._ctx: ClientContext = ctx
        self._ndata = DataView(self, NODE)
        self._edata = DataView(self, EDGE)

    # ----- size and types ----------------------------------------------------------------------

    def num_nodes(self, ntype: str | None = None) -> int:
        """Number of nodes of the graph."""
        _check_type(ntype, DEFAULT_NTYPE, "ntype")
        return self._ctx.num_rows(NODE)

    def num_edges(self, etype=None) -> int:
        """Number of edges of the graph."""
        _check_type(etype, DEFAULT_ETYPE, "etype")
        return self._ctx.num_rows(EDGE)

    number_of_nodes = num_nodes
    number_of_edges = num_edges

    @property
    def ntypes(self) -> list[str]:
        """Node types (homogeneous graphs: ``['_N']``), as the partition book lists them."""
        return self._ctx.book.ntypes

    @property
    def etypes(self) -> list[str]:
        """Edge types (homogeneous graphs: ``['_E']``), as the partition book lists them."""
        return self._ctx.book.etypes

    @property
    def canonical_etypes(self) -> list[tuple[str, str, str]]:
        """Canonical edge types (homogeneous graphs: ``[('_N', '_E', '_N')]``)."""
        return self._ctx.book.canonical_etypes

    def get_ntype_id(self, ntype: str | None) -> int:
        """0, the only node type."""
        _check_type(ntype, DEFAULT_NTYPE, "ntype")
        return 0

    def get_etype_id(self, etype) -> int:
        """0, the only edge type."""
        _check_type(etype, DEFAULT_ETYPE, "etype")
        return 0

    @property
    def is_homogeneous(self) -> bool:
        return True

    @property
    def idtype(self) -> torch.dtype:
        """The dtype of node and edge IDs (int64)."""
        return torch.int64

    @property
    def device(self) -> torch.device:
        """Where the graph's data lives from the trainer's side: the CPU."""
        return torch.device("cpu")

    @property
    def local_partition(self):
        """The co-located partition's :class:`~graphstore.partition.types.PartitionData` (memory-mapped),
        or None when no partition is co-located."""
        return self._ctx.local_partition_data

    def rank(self) -> int:
        """This trainer's rank in the trainer group."""
        return self._ctx.rank

    # ----- partitioning ------------------------------------------------------------------------

    def get_partition_book(self):
        """The :class:`~graphstore.partition.RangePartitionBook`."""
        return self._ctx.book

    def get_node_partition_policy(self, ntype: str = DEFAULT_NTYPE):
        """The partition policy of node data."""
        from graphstore.partition import PartitionPolicy

        _check_type(ntype, DEFAULT_NTYPE, "ntype")
        return PartitionPolicy(f"{NODE}:{DEFAULT_NTYPE}", self._ctx.book)

    def get_edge_partition_policy(self, etype=DEFAULT_ETYPE):
        """The partition policy of edge data."""
        from graphstore.partition import PartitionPolicy

        _check_type(etype, DEFAULT_ETYPE, "etype")
        return PartitionPolicy(f"{EDGE}:{DEFAULT_ETYPE}", self._ctx.book)

    # ----- data --------------------------------------------------------------------------------

    @property
    def ndata(self) -> DataView:
        """Node data: a mapping of name -> DistTensor (assign a DistTensor or a full tensor to add one)."""
        return self._ndata

    @property
    def edata(self) -> DataView:
        """Edge data: a mapping of name -> DistTensor."""
        return self._edata

    def node_attr_schemes(self) -> dict[str, AttrScheme]:
        """Row shape and dtype of every node feature."""
        return self._ndata.schemes()

    def edge_attr_schemes(self) -> dict[str, AttrScheme]:
        """Row shape and dtype of every edge feature."""
        return self._edata.schemes()

    # ----- structure ---------------------------------------------------------------------------

    def find_edges(self, edges, etype=None) -> tuple[torch.Tensor, torch.Tensor]:
        """Source and destination node IDs of edges.

        Args:
            edges: edge IDs (int, list, numpy or torch).
            etype: only ``'_E'``.

        Returns:
            ``(src, dst)`` int64 tensors aligned with ``edges``.

        Raises:
            IndexError: an edge ID out of range.
            TypeError: a float index.
        """
        _check_type(etype, DEFAULT_ETYPE, "etype")
        eids = normalize_index(edges, self.num_edges(), what="edges")
        pieces = self._per_partition(eids, EDGE, lambda part, ids: part.find_edges(ids))
        src = assemble(eids.size, (), np.dtype(np.int64), [(pos, res[0]) for pos, res in pieces])
        dst = assemble(eids.size, (), np.dtype(np.int64), [(pos, res[1]) for pos, res in pieces])
        return torch.from_numpy(src), torch.from_numpy(dst)

    def in_degrees(self, v=None):
        """In-degrees of nodes ``v`` (all nodes when None); an int for an int ``v``."""
        return self._degrees(v, "in")

    def out_degrees(self, v=None):
        """Out-degrees of nodes ``v`` (all nodes when None); an int for an int ``v``."""
        return self._degrees(v, "out")

    def _degrees(self, v, edge_dir: str):
        scalar = isinstance(v, (int, np.integer)) and not isinstance(v, bool)
        nids = normalize_index(slice(None) if v is None else v, self.num_nodes(), what="v")
        pieces = self._per_partition(nids, NODE, lambda part, ids: part.degrees(ids, edge_dir))
        degrees = assemble(nids.size, (), np.dtype(np.int64), pieces)
        return int(degrees[0]) if scalar else torch.from_numpy(degrees)

    def _per_partition(self, ids: np.ndarray, policy: str, call) -> list[tuple[np.ndarray, object]]:
        """Run ``call(partition, ids_of_partition)`` on every owning partition (co-located one in-process)."""
        ctx = self._ctx
        if ids.size == 0:
            return []
        routes = ctx.route(ids, policy)
        calls = []
        for part_id, _, part_ids in routes:
            reader = ctx.local_reader(part_id)
            if reader is None:
                reader = ctx.partition(part_id)
            calls.append(lambda reader=reader, part_ids=part_ids: call(reader, part_ids))
        results = ctx.run_parallel(calls)
        return [(positions, result) for (_, positions, _), result in zip(routes, results, strict=True)]

    # ----- synchronization ---------------------------------------------------------------------

    def barrier(self, timeout_s: float | None = None) -> None:
        """Block until every trainer of the group (torch.distributed / WORLD_SIZE) reached the barrier.

        Args:
            timeout_s: how long to wait; default: the call deadline of the cluster config.

        Raises:
            TimeoutError: (``BarrierTimeoutError``) not everyone arrived in time.
            graphstore.errors.ServerUnavailableError: partition 0's server does not answer.
        """
        ctx = self._ctx
        world = ctx.world_size
        if ctx.standalone:
            return  # every partition is in this process: there is no one else to wait for
        group = os.environ.get("MASTER_ADDR", "") + ":" + os.environ.get("MASTER_PORT", "")
        name = f"graphstore.barrier.{self.graph_name}.{group}"
        timeout = float(timeout_s) if timeout_s is not None else ctx.policy.deadline_s
        ctx.partition(0).barrier(name, world, timeout, participant=f"{ctx.client_id}/rank{ctx.rank}")

    def __repr__(self) -> str:
        return (
            f"DistGraph(name={self.graph_name!r}, num_nodes={self.num_nodes()}, "
            f"num_edges={self.num_edges()}, num_parts={self._ctx.num_parts}, "
            f"standalone={self._ctx.standalone})"
        )


class DataView(MutableMapping):
    """``g.ndata`` / ``g.edata``: names -> :class:`DistTensor` of one policy.

    Reading a name attaches to the tensor on the servers; assigning a :class:`DistTensor` registers it
    under the key (keeping the object, and so a non-persistent tensor, alive as long as the graph);
    assigning a full torch tensor or numpy array creates (or overwrites) the tensor ``key`` with those
    rows. ``del`` drops the graph's reference (a non-persistent tensor it created is then released).
    Unnamed tensors are hidden from iteration.
    """

    def __init__(self, graph: DistGraph, policy: str):
        self._graph = graph
        self._policy = policy
        self._registered: dict[str, DistTensor] = {}
        self._attached: dict[str, DistTensor] = {}

    def _server_schemes(self) -> dict[str, TensorScheme]:
        schemes = self._graph._ctx.refresh_schemes()
        out = {}
        for name, scheme in schemes.items():
            if scheme.policy != self._policy or name.startswith(ANONYMOUS_PREFIX):
                continue
            key = (
                name[len(_EDGE_PREFIX) :] if self._policy == EDGE and name.startswith(_EDGE_PREFIX) else name
            )
            out[key] = scheme
        return out

    def _keys(self) -> list[str]:
        names = dict.fromkeys(self._server_schemes())
        names.update(dict.fromkeys(self._registered))
        return list(names)

    def __getitem__(self, key: str) -> DistTensor:
        if key in self._registered:
            return self._registered[key]
        cached = self._attached.get(key)
        if cached is not None:
            return cached
        ctx = self._graph._ctx
        scheme = None
        for candidate in (key, _EDGE_PREFIX + key) if self._policy == EDGE else (key,):
            scheme = ctx.tensor_scheme(candidate)
            if scheme is None:
                scheme = ctx.tensor_scheme(candidate, refresh=True)
            if scheme is not None and scheme.policy == self._policy:
                break
            scheme = None
        if scheme is None:
            kind = "node" if self._policy == NODE else "edge"
            raise KeyError(f"no {kind} data named {key!r}; available: {sorted(self._keys())}")
        tensor = DistTensor._from_scheme(ctx, scheme)
        self._attached[key] = tensor
        return tensor

    def __setitem__(self, key: str, value) -> None:
        if not isinstance(key, str) or not key:
            raise KeyError(f"data names must be non-empty strings, got {key!r}")
        if isinstance(value, DistTensor):
            if value._policy_kind != self._policy:
                raise ValueError(
                    f"DistTensor {value.name!r} is partitioned by {value._policy_kind} but is assigned to "
                    f"{'ndata' if self._policy == NODE else 'edata'}"
                )
            self._registered[key] = value
            self._attached.pop(key, None)
            return
        if isinstance(value, np.ndarray):
            from graphstore import dtypes

            value = dtypes.to_torch(value, dtypes.name_of(value.dtype))
        if not isinstance(value, torch.Tensor):
            raise TypeError(
                "ndata/edata values must be DistTensors, torch tensors or numpy arrays, "
                f"got {type(value).__name__}"
            )
        ctx = self._graph._ctx
        total = ctx.num_rows(self._policy)
        if value.dim() == 0 or value.shape[0] != total:
            raise ValueError(f"{key!r}: a full tensor needs {total} rows, got shape {tuple(value.shape)}")
        tensor = DistTensor(tuple(value.shape), value.dtype, name=key, part_policy=self._policy)
        tensor.write(slice(0, total), value)
        self._registered[key] = tensor
        self._attached.pop(key, None)

    def __delitem__(self, key: str) -> None:
        found = self._registered.pop(key, None) is not None
        found = self._attached.pop(key, None) is not None or found
        if not found:
            raise KeyError(f"{key!r} is not registered in this graph's data view")

    def __contains__(self, key: object) -> bool:
        if key in self._registered or key in self._attached:
            return True
        if not isinstance(key, str):
            return False
        try:
            self[key]
        except KeyError:
            return False
        return True

    def __iter__(self) -> Iterator[str]:
        return iter(self._keys())

    def __len__(self) -> int:
        return len(self._keys())

    def schemes(self) -> dict[str, AttrScheme]:
        """Row shape and torch dtype per name."""
        from graphstore import dtypes

        out = {}
        for key, scheme in self._server_schemes().items():
            out[key] = AttrScheme(tuple(scheme.shape[1:]), dtypes.torch_dtype(scheme.dtype))
        for key, tensor in self._registered.items():
            out[key] = AttrScheme(tensor.shape[1:], tensor.dtype)
        return out

    def __repr__(self) -> str:
        kind = "NodeDataView" if self._policy == NODE else "EdgeDataView"
        return f"{kind}({sorted(self._keys())})"


def _check_type(value, default: str, what: str) -> None:
    if value is None:
        return
    if isinstance(value, tuple) and len(value) == 3:
        value = value[1]
    if value != default:
        raise KeyError(f"unknown {what} {value!r}; this graph has only {default!r}")
