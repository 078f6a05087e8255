"""Input graphs for the partitioner in memory: :class:`GraphData` and its validation.

A graph is built from a dict of arrays shaped like an input ``.npz`` by
:func:`~graphstore.partition.array_input.graph_from_arrays` (files are read by
:mod:`graphstore.partition.graph_files`). Such a dict holds ``src`` and ``dst`` (integer arrays of
length E), optionally ``num_nodes`` (a scalar), and any number of node arrays (first dimension N:
``feat``, ``label``, ``train_mask``...) and edge arrays (first dimension E). Whether an array belongs to
the nodes or the edges is decided by its length; when N == E it is taken as a node array. N is
``num_nodes`` when given, else the length of the node arrays, else ``max(src, dst) + 1``. A typed graph
uses its own key convention (``num_nodes/<ntype>``, ``node/<ntype>/<name>``,
``edge/<src>:<etype>:<dst>/...``; see :mod:`graphstore.partition.typed_input`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from graphstore.partition.memory import stream
from graphstore.types import DEFAULT_CANONICAL_ETYPE, DEFAULT_NTYPE, GraphSchema, etype_key


@dataclass
class GraphData:
    """A graph with typed nodes and edges, held in the homogeneous form the partitioner works on.

    Node type ``t``'s per-type ID ``i`` is the homogeneous input ID ``node_offsets[t] + i`` (the types
    lie one after another in type-ID order); the edges of type ``e`` are the positions
    ``[edge_offsets[e], edge_offsets[e+1])`` of ``src`` / ``dst``. A homogeneous graph is the one-type
    case; build it with :meth:`homogeneous`.

    Attributes:
        schema: the node and edge types.
        nodes_per_type: node count of each node type.
        src, dst: int64 [E] homogeneous input IDs (edge ``i`` goes ``src[i] -> dst[i]``).
        node_data: ``{ntype: {name: array}}``, arrays whose first dimension is the type's node count.
        edge_data: ``{"src:etype:dst": {name: array}}``, arrays whose first dimension is the type's edge
            count.
    """

    schema: GraphSchema
    nodes_per_type: tuple[int, ...]
    src: np.ndarray
    dst: np.ndarray
    node_data: dict[str, dict[str, np.ndarray]] = field(default_factory=dict)
    edge_data: dict[str, dict[str, np.ndarray]] = field(default_factory=dict)
    edges_per_type: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        self.nodes_per_type = tuple(int(n) for n in self.nodes_per_type)
        if self.edges_per_type is None:
            self.edges_per_type = (int(np.asarray(self.src).shape[0]),)
        self.edges_per_type = tuple(int(n) for n in self.edges_per_type)

    @classmethod
    def homogeneous(
        cls,
        num_nodes: int,
        src: np.ndarray,
        dst: np.ndarray,
        node_data: dict[str, np.ndarray] | None = None,
        edge_data: dict[str, np.ndarray] | None = None,
    ) -> GraphData:
        """A one-type graph (``_N``, ``_E``) from its edges and its node / edge arrays by name."""
        return cls(
            schema=GraphSchema(),
            nodes_per_type=(int(num_nodes),),
            src=src,
            dst=dst,
            node_data={DEFAULT_NTYPE: dict(node_data or {})},
            edge_data={etype_key(DEFAULT_CANONICAL_ETYPE): dict(edge_data or {})},
            edges_per_type=(int(np.asarray(src).shape[0]),),
        )

    @property
    def num_nodes(self) -> int:
        return int(sum(self.nodes_per_type))

    @property
    def num_edges(self) -> int:
        return int(self.src.shape[0])

    @property
    def node_offsets(self) -> np.ndarray:
        """int64 [num_ntypes + 1]: the homogeneous input ID where each node type starts."""
        return np.concatenate(([0], np.cumsum(self.nodes_per_type))).astype(np.int64)

    @property
    def edge_offsets(self) -> np.ndarray:
        """int64 [num_etypes + 1]: the position in ``src`` / ``dst`` where each edge type starts."""
        return np.concatenate(([0], np.cumsum(self.edges_per_type))).astype(np.int64)

    def node_type_of(self) -> np.ndarray:
        """int64 [N]: the type ID of every node, in homogeneous input order."""
        return np.repeat(np.arange(len(self.nodes_per_type), dtype=np.int64), self.nodes_per_type)

    def edge_type_of(self) -> np.ndarray:
        """[E]: the type ID of every edge, in input order, in the narrowest signed integer dtype (int8 for
        fewer than 128 edge types: one byte per edge)."""
        from graphstore.partition.relabel import type_dtype

        num_types = len(self.edges_per_type)
        return np.repeat(np.arange(num_types, dtype=type_dtype(num_types)), self.edges_per_type)

    def node_arrays(self) -> list[tuple[str, str, np.ndarray]]:
        """Every node array as ``(ntype, name, array)``."""
        return [(t, name, a) for t, arrays in self.node_data.items() for name, a in arrays.items()]

    def edge_arrays(self) -> list[tuple[str, str, np.ndarray]]:
        """Every edge array as ``("src:etype:dst", name, array)``."""
        return [(t, name, a) for t, arrays in self.edge_data.items() for name, a in arrays.items()]

    def validate(self) -> None:
        """Check lengths, dtypes and ID ranges.

        Raises:
            ValueError: naming the array and the offending value.
        """
        validate_graph(self)


def id_range(ids: np.ndarray, chunk: int = 1 << 24) -> tuple[int, int] | None:
    """``(min, max)`` of an integer array (None when empty), read a chunk at a time so that a
    memory-mapped array never becomes resident as a whole."""
    lo, hi = None, None
    for _, piece in stream(chunk, ids):
        piece_lo, piece_hi = int(piece.min()), int(piece.max())
        lo = piece_lo if lo is None else min(lo, piece_lo)
        hi = piece_hi if hi is None else max(hi, piece_hi)
    return None if lo is None else (lo, hi)


def check_id_array(name: str, arr: np.ndarray) -> np.ndarray:
    """``arr`` as a one-dimensional integer array of node IDs.

    Raises:
        ValueError: another shape or a non-integer dtype (named).
    """
    arr = np.asarray(arr)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {arr.shape}")
    if arr.size and arr.dtype.kind not in "iu":
        raise ValueError(f"{name} must hold integer node IDs, got dtype {arr.dtype}")
    return arr


def validate_graph(graph: GraphData) -> None:
    """Validate a :class:`GraphData` (see :meth:`GraphData.validate`).

    Raises:
        ValueError: arrays of mismatched length, non-integer IDs, IDs outside their type's range, a
            graph without nodes.
    """
    schema = graph.schema
    if len(graph.nodes_per_type) != len(schema.ntypes) or len(graph.edges_per_type) != len(
        schema.canonical_etypes
    ):
        raise ValueError("nodes_per_type / edges_per_type must give one count per node / edge type")
    if graph.num_nodes < 1:
        raise ValueError(f"num_nodes must be >= 1, got {graph.num_nodes}")
    check_id_array("src", graph.src)
    check_id_array("dst", graph.dst)
    if graph.src.shape[0] != graph.dst.shape[0]:
        raise ValueError(f"src and dst differ in length: {graph.src.shape[0]} != {graph.dst.shape[0]}")
    if sum(graph.edges_per_type) != graph.num_edges:
        raise ValueError(f"edges_per_type {graph.edges_per_type} do not add up to {graph.num_edges} edges")
    offsets, edge_offsets = graph.node_offsets, graph.edge_offsets
    for e, canonical in enumerate(schema.canonical_etypes):
        where = "" if schema.is_homogeneous else f" of edge type {etype_key(canonical)}"
        for end_name, ids, ntype in (("src", graph.src, canonical[0]), ("dst", graph.dst, canonical[2])):
            t = schema.ntype_id(ntype)
            bounds = id_range(ids[edge_offsets[e] : edge_offsets[e + 1]])
            if bounds is None:
                continue
            lo, hi = bounds[0] - int(offsets[t]), bounds[1] - int(offsets[t])
            if lo < 0:
                raise ValueError(f"{end_name}{where} has node ID {lo} < 0")
            if hi >= graph.nodes_per_type[t]:
                raise ValueError(
                    f"{end_name}{where} has node ID {hi} >= num_nodes={graph.nodes_per_type[t]}"
                    + ("" if schema.is_homogeneous else f" of node type {ntype!r}")
                )
    for kind, data, counts, type_id in (
        ("node", graph.node_data, graph.nodes_per_type, schema.ntype_id),
        ("edge", graph.edge_data, graph.edges_per_type, schema.etype_id),
    ):
        for type_name, arrays in data.items():
            rows = counts[type_id(type_name)]
            for name, arr in arrays.items():
                if arr.ndim == 0 or arr.shape[0] != rows:
                    label = repr(name) if schema.is_homogeneous else f"{type_name}/{name}"
                    raise ValueError(f"{kind} array {label} has shape {arr.shape}; expected {rows} rows")
