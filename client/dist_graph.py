"""DistGraph: the trainer's view of a partitioned graph, following ``dgl.distributed.DistGraph``.

It reads the graph's size and structure from the partitions (the co-located one in-process), exposes
node and edge data as mapping views of :class:`~graphstore.client.dist_tensor.DistTensor`, and provides
a barrier over the trainer group. In distributed mode it uses the context ``initialize()`` opened; with
no ``initialize()`` and a ``part_config`` it opens a standalone context that loads every partition
in-process (for debugging and tests).
"""

from __future__ import annotations

import os

import numpy as np
import torch

from graphstore.client.api import initialize
from graphstore.client.constants import CONFIG_ENV
from graphstore.client.context import ClientContext, current_context, standalone_context
from graphstore.client.graph_data import AttrScheme, DataView, TypeViews
from graphstore.client.routing import assemble, normalize_index
from graphstore.partition import PartitionPolicy, load_partition_book
from graphstore.types import DEFAULT_ETYPE, DEFAULT_NTYPE, EDGE, NODE, CanonicalEtype, etype_key


class DistGraph:
    """A partitioned graph served by partition servers (or loaded in-process in standalone mode).

    Args:
        graph_name: the graph's name (as partitioned).
        gpb: a partition book; optional, checked against the servers'.
        part_config: the partition config (NAME.json); opens standalone mode when ``initialize()`` was
            not called and ``GRAPHSTORE_CONFIG`` is not set.

    Raises:
        RuntimeError: no ``initialize()``, no ``GRAPHSTORE_CONFIG`` and no ``part_config``.
        ValueError: a graph name, partition book or ``part_config`` that differs from what the servers
            serve, or from the standalone graph already open in this process.
        FileNotFoundError: a missing ``part_config``.
    """

    def __init__(self, graph_name: str, gpb=None, part_config: str | None = None):
        ctx = current_context()
        if ctx is None and os.environ.get(CONFIG_ENV):
            ctx = initialize()
        if ctx is None:
            if part_config is None:
                raise RuntimeError(
                    f"DistGraph({graph_name!r}): not connected; call graphstore.client.initialize() first, "
                    "or pass part_config=... for standalone mode"
                )
            ctx = standalone_context(part_config)
        elif part_config is not None:
            _check_part_config(ctx, part_config)
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
        self._ndata = DataView(self._ctx, NODE)
        self._edata = DataView(self._ctx, EDGE)
        self._node_views = TypeViews(self._ctx, NODE, self._ndata, self.num_nodes)
        self._edge_views = TypeViews(self._ctx, EDGE, self._edata, self.num_edges)

    # ----- size and types ----------------------------------------------------------------------

    @property
    def _schema(self):
        return self._ctx.book.schema

    def num_nodes(self, ntype: str | None = None) -> int:
        """Number of nodes of one type, or of the whole graph (None)."""
        return self._ctx.book.num_nodes(ntype)

    def num_edges(self, etype=None) -> int:
        """Number of edges of one type (a name, ``"src:etype:dst"`` or a canonical triple), or of the
        whole graph (None)."""
        return self._ctx.book.num_edges(etype)

    number_of_nodes = num_nodes
    number_of_edges = num_edges

    @property
    def ntypes(self) -> list[str]:
        """Node types in ID order (``['_N']`` on a homogeneous graph)."""
        return list(self._schema.ntypes)

    @property
    def etypes(self) -> list[str]:
        """Edge type names in ID order (``['_E']`` on a homogeneous graph)."""
        return self._schema.etypes

    @property
    def canonical_etypes(self) -> list[CanonicalEtype]:
        """Canonical edge types ``(src_type, edge_type, dst_type)`` in ID order."""
        return list(self._schema.canonical_etypes)

    def to_canonical_etype(self, etype) -> CanonicalEtype:
        """The canonical ``(src_type, edge_type, dst_type)`` of an edge type.

        Raises:
            KeyError: an unknown type, or a name shared by several canonical types (the message lists them).
        """
        return self._schema.to_canonical_etype(etype)

    def get_ntype_id(self, ntype: str | None) -> int:
        """The ID of a node type (None: the only one of a homogeneous graph).

        Raises:
            KeyError: an unknown node type.
        """
        return self._schema.ntype_id(ntype)

    def get_etype_id(self, etype) -> int:
        """The ID of an edge type (None: the only one of a homogeneous graph).

        Raises:
            KeyError: an unknown or ambiguous edge type.
        """
        return self._schema.etype_id(etype)

    @property
    def is_homogeneous(self) -> bool:
        """One node type and one edge type."""
        return self._schema.is_homogeneous

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
        """The partition policy of one node type's data (``'_N'``: every node, homogeneous IDs).

        Raises:
            KeyError: an unknown node type.
        """
        return PartitionPolicy(f"{NODE}:{ntype}", self._ctx.book)

    def get_edge_partition_policy(self, etype=DEFAULT_ETYPE):
        """The partition policy of one edge type's data (``'_E'``: every edge, homogeneous IDs).

        Raises:
            KeyError: an unknown or ambiguous edge type.
        """
        name = etype_key(etype) if isinstance(etype, tuple) else etype
        return PartitionPolicy(f"{EDGE}:{name}", self._ctx.book)

    # ----- data --------------------------------------------------------------------------------

    @property
    def ndata(self) -> DataView:
        """Node data of a homogeneous graph: name -> DistTensor (assign a DistTensor or a full tensor to
        add one).

        Raises:
            RuntimeError: on a typed graph (use ``g.nodes[ntype].data``), as DGL does.
        """
        self._check_homogeneous("ndata", "g.nodes[ntype].data")
        return self._ndata

    @property
    def edata(self) -> DataView:
        """Edge data of a homogeneous graph: name -> DistTensor.

        Raises:
            RuntimeError: on a typed graph (use ``g.edges[etype].data``).
        """
        self._check_homogeneous("edata", "g.edges[etype].data")
        return self._edata

    @property
    def nodes(self) -> TypeViews:
        """``g.nodes[ntype].data[name]``: the data of one node type; ``g.nodes(ntype)``: its IDs."""
        return self._node_views

    @property
    def edges(self) -> TypeViews:
        """``g.edges[etype].data[name]``: the data of one edge type; ``g.edges(etype)``: its IDs."""
        return self._edge_views

    def _check_homogeneous(self, what: str, instead: str) -> None:
        if not self._schema.is_homogeneous:
            raise RuntimeError(
                f"g.{what} is for graphs with one node and edge type; this graph has node types "
                f"{self.ntypes} and edge types {self.etypes}: use {instead}"
            )

    def node_attr_schemes(self, ntype: str | None = None) -> dict[str, AttrScheme]:
        """Row shape and dtype of every node feature (of one type on a typed graph)."""
        return (self._ndata if self._schema.is_homogeneous else self.nodes[ntype].data).schemes()

    def edge_attr_schemes(self, etype=None) -> dict[str, AttrScheme]:
        """Row shape and dtype of every edge feature (of one type on a typed graph)."""
        return (self._edata if self._schema.is_homogeneous else self.edges[etype].data).schemes()

    # ----- structure ---------------------------------------------------------------------------

    def find_edges(self, edges, etype=None) -> tuple[torch.Tensor, torch.Tensor]:
        """Source and destination node IDs of edges.

        Args:
            edges: edge IDs (int, list, numpy or torch): per-type IDs of ``etype`` on a typed graph,
                homogeneous IDs for None.
            etype: the edge type (a name, ``"src:etype:dst"`` or a canonical triple).

        Returns:
            ``(src, dst)`` int64 tensors aligned with ``edges``: per-type node IDs of the type's source
            and destination types (homogeneous IDs for ``etype=None``).

        Raises:
            IndexError: an edge ID out of range. KeyError: an unknown edge type.
            TypeError: a float index.
        """
        book, typed = self._ctx.book, etype is not None and not self._schema.is_homogeneous
        eids = normalize_index(edges, self.num_edges(etype), what="edges")
        homo = book.map_to_homo_eid(eids, etype) if typed else eids
        pieces = self._per_partition(homo, EDGE, lambda part, ids: part.find_edges(ids))
        src = assemble(eids.size, (), np.dtype(np.int64), [(pos, res[0]) for pos, res in pieces])
        dst = assemble(eids.size, (), np.dtype(np.int64), [(pos, res[1]) for pos, res in pieces])
        if typed:
            src, dst = book.map_to_per_ntype(src)[1], book.map_to_per_ntype(dst)[1]
        return torch.from_numpy(src), torch.from_numpy(dst)

    def in_degrees(self, v=None, etype=None):
        """In-degrees of nodes ``v`` (all nodes when None); an int for an int ``v``.

        On a typed graph with ``etype``, ``v`` are per-type IDs of the edge type's destination type and
        only edges of that type count; without ``etype``, ``v`` are homogeneous IDs and every edge
        type counts.

        Raises:
            IndexError: a node ID out of range. KeyError: an unknown edge type.
        """
        return self._degrees(v, "in", etype)

    def out_degrees(self, v=None, etype=None):
        """Out-degrees of nodes ``v`` (all nodes when None); see :meth:`in_degrees`."""
        return self._degrees(v, "out", etype)

    def _degrees(self, v, edge_dir: str, etype):
        scalar = isinstance(v, (int, np.integer)) and not isinstance(v, bool)
        book, schema = self._ctx.book, self._schema
        etype_id, ntype = None, None
        if etype is not None and not schema.is_homogeneous:
            canonical = schema.to_canonical_etype(etype)
            etype_id = schema.etype_id(canonical)
            ntype = canonical[2] if edge_dir == "in" else canonical[0]
        elif etype is not None:
            schema.etype_id(etype)  # checks the name
        nids = normalize_index(slice(None) if v is None else v, self.num_nodes(ntype), what="v")
        homo = book.map_to_homo_nid(nids, ntype) if ntype is not None else nids
        pieces = self._per_partition(homo, NODE, lambda part, ids: part.degrees(ids, edge_dir, etype_id))
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


def _check_part_config(ctx: ClientContext, part_config) -> None:
    """A ``part_config`` given while a context is open must describe the graph that context serves.

    Raises:
        FileNotFoundError: the file does not exist.
        ValueError: a standalone context of another partition config, or servers whose partition book
            differs from the file's (the message names both).
    """
    path = os.fspath(part_config)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"part_config {path!r} does not exist")
    if ctx.standalone:
        standalone_context(path)  # raises unless it is the partition config already open
        return
    book = load_partition_book(path)
    if book.graph_name != ctx.graph_name or book != ctx.book:
        raise ValueError(
            f"part_config {path!r} describes graph {book.graph_name!r} ({book.num_partitions()} "
            f"partitions, {book.num_nodes()} nodes) but the servers serve {ctx.graph_name!r} "
            f"({ctx.num_parts} partitions, {ctx.book.num_nodes()} nodes)"
        )
