"""Contracts of the partition package: feature schemes and one loaded partition.

On-disk layout written by :func:`graphstore.partition.partition_graph` (docs/partition-format.md). A
homogeneous graph is the one-type case (node type ``_N``, edge type ``('_N', '_E', '_N')``).

    OUT/NAME.json            format_version (2; 3 where in_eid.npy exists), graph_name, num_nodes,
                             num_edges, num_parts, part_method,
                             ntypes {ntype: id}, etypes {"src:etype:dst": id},
                             node_map {ntype: [[homo_start, homo_end] per partition]},
                             edge_map {"src:etype:dst": [[homo_start, homo_end] per partition]},
                             node_feats {ntype: {name: {"dtype": "float32", "shape": [100]}}},
                             edge_feats {"src:etype:dst": {name: scheme}},
                             parts: [{"path": "part0", ...}, ...] (relative to NAME.json)
    OUT/partK/in_indptr.npy  int64: the in-edge CSR of each edge type, concatenated in edge-type order:
                             etype e's piece has n_k[dst_type(e)] + 1 entries, absolute positions into
                             in_src; local node i of that type has its in-edges of type e at
                             positions piece[i]:piece[i+1]
    OUT/partK/in_src.npy     int64 [e_k]: homogeneous global source ID of each in-edge; position j is
                             homogeneous edge ID edge_start_k + j (edges sorted by (type, destination))
                             unless in_eid.npy says otherwise
    OUT/partK/in_eid.npy     optional, int64 [e_k]: the local edge ID (homogeneous ID - edge_start_k) of the
                             edge at each in_src position, where the IDs are not the positions (a graph
                             partitioned into one part keeps its input's edge IDs; a converted DGL
                             partitioning keeps DGL's); local edge IDs of a type stay its positions' range
    OUT/partK/out_indptr.npy int64: the out-edge CSR of each edge type over its source type's local nodes,
                             concatenated the same way, positions into out_dst / out_eid
    OUT/partK/out_dst.npy    int64: homogeneous destination IDs of those out-edges
    OUT/partK/out_eid.npy    int64: their homogeneous edge IDs (owned by the destination's partition)
    OUT/partK/orig_nid.npy   int64 [n_k]: original per-type ID of each local node
    OUT/partK/orig_eid.npy   int64 [e_k]: original per-type ID of each local edge
    OUT/partK/node_feat/NTYPE/NAME.npy, OUT/partK/edge_feat/SRC:ETYPE:DST/NAME.npy: row-sliced arrays
                             (bfloat16 stored as uint16); a homogeneous graph keeps format 1's
                             node_feat/NAME.npy and edge_feat/NAME.npy

Inside partition k, the node types lie one after the other in type-ID order, and so do the edge types:
homogeneous IDs and per-type IDs convert by the partition book's per-type ranges (DGL's layout).
Format 1 folders (homogeneous, written before typed graphs) load unchanged. Every .npy loads with
``mmap_mode='r'``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from graphstore.types import GraphSchema

FORMAT_VERSION = 2
# Format 2 plus in_eid.npy (edge IDs that are not the in-CSR positions): a reader that does not know
# in_eid.npy must refuse such a partitioning rather than read its edge IDs wrong.
FORMAT_VERSION_IN_EID = 3
READABLE_FORMAT_VERSIONS = (1, 2, 3)


@dataclass(frozen=True)
class FeatureScheme:
    """Name, dtype (canonical name, see :mod:`graphstore.dtypes`) and per-row shape of a feature."""

    name: str
    dtype: str
    shape: tuple[int, ...]


@dataclass
class PartitionData:
    """One partition as loaded by :func:`graphstore.partition.load_partition` (arrays memory-mapped).

    Attributes:
        part_id: this partition's index.
        graph_name: the graph's name from the config.
        book: the RangePartitionBook of the whole graph, with ``partid == part_id``.
        schema: the graph's node and edge types.
        node_start, node_end: homogeneous node IDs owned here, ``[node_start, node_end)``.
        edge_start, edge_end: homogeneous edge IDs owned here (the in-edges of the owned nodes).
        ntype_offsets: int64 [num_ntypes + 1]: local nodes of type t are ``[ntype_offsets[t],
            ntype_offsets[t+1])`` (local = homogeneous ID - node_start).
        etype_offsets: int64 [num_etypes + 1]: local edge positions of each edge type.
        in_indptr, in_src: the in-edge CSR of every edge type (see the module docstring and
            :meth:`in_indptr_of`).
        out_indptr, out_dst, out_eid: the out-edge CSR of every edge type (:meth:`out_indptr_of`).
        orig_nid, orig_eid: original per-type IDs of the local nodes and edges (in local ID order).
        node_feats: ``{ntype: {name: array}}``, storage arrays (bfloat16 as uint16) in local order of
            the type's nodes.
        edge_feats: ``{"src:etype:dst": {name: array}}``, likewise for the edges of each type.
        node_schemes, edge_schemes: the dtype and row shape of each feature, nested the same way.
        config_path: the NAME.json this was loaded from.
        in_eid: the local edge ID of the edge at each in-edge position, or None when the IDs are the
            positions (:meth:`edge_ids_at`, :meth:`positions_of`).
    """

    part_id: int
    graph_name: str
    book: object
    node_start: int
    node_end: int
    edge_start: int
    edge_end: int
    in_indptr: np.ndarray
    in_src: np.ndarray
    out_indptr: np.ndarray
    out_dst: np.ndarray
    out_eid: np.ndarray
    orig_nid: np.ndarray
    orig_eid: np.ndarray
    schema: GraphSchema = field(default_factory=GraphSchema)
    ntype_offsets: np.ndarray | None = None
    etype_offsets: np.ndarray | None = None
    node_feats: dict[str, dict[str, np.ndarray]] = field(default_factory=dict)
    edge_feats: dict[str, dict[str, np.ndarray]] = field(default_factory=dict)
    node_schemes: dict[str, dict[str, FeatureScheme]] = field(default_factory=dict)
    edge_schemes: dict[str, dict[str, FeatureScheme]] = field(default_factory=dict)
    config_path: str = ""
    in_eid: np.ndarray | None = None

    def __post_init__(self) -> None:
        if self.ntype_offsets is None:
            self.ntype_offsets = np.array([0, self.num_local_nodes], dtype=np.int64)
        if self.etype_offsets is None:
            self.etype_offsets = np.array([0, self.num_local_edges], dtype=np.int64)
        nodes = np.diff(self.ntype_offsets)
        in_sizes = [int(nodes[self.schema.ntype_id(c[2])]) + 1 for c in self.schema.canonical_etypes]
        out_sizes = [int(nodes[self.schema.ntype_id(c[0])]) + 1 for c in self.schema.canonical_etypes]
        self._in_starts = np.concatenate(([0], np.cumsum(in_sizes))).astype(np.int64)
        self._out_starts = np.concatenate(([0], np.cumsum(out_sizes))).astype(np.int64)

    @property
    def num_local_nodes(self) -> int:
        return self.node_end - self.node_start

    @property
    def num_local_edges(self) -> int:
        return self.edge_end - self.edge_start

    def edge_ids_at(self, positions: np.ndarray) -> np.ndarray:
        """Local edge IDs (homogeneous ID - ``edge_start``) of in-edge positions."""
        return positions if self.in_eid is None else np.asarray(self.in_eid)[positions]

    def positions_of(self, local_eids: np.ndarray) -> np.ndarray:
        """In-edge positions of local edge IDs (the inverse of :meth:`edge_ids_at`)."""
        if self.in_eid is None:
            return local_eids
        inverse = self.__dict__.get("_in_positions")
        if inverse is None:
            inverse = np.empty(self.num_local_edges, dtype=np.int64)
            inverse[np.asarray(self.in_eid)] = np.arange(self.num_local_edges, dtype=np.int64)
            self.__dict__["_in_positions"] = inverse
        return inverse[local_eids]

    def in_indptr_of(self, etype_id: int) -> np.ndarray:
        """The in-edge CSR row pointer of edge type ``etype_id`` over its destination type's local nodes
        (absolute positions into ``in_src``)."""
        return self.in_indptr[self._in_starts[etype_id] : self._in_starts[etype_id + 1]]

    def out_indptr_of(self, etype_id: int) -> np.ndarray:
        """The out-edge CSR row pointer of edge type ``etype_id`` over its source type's local nodes
        (positions into ``out_dst`` / ``out_eid``)."""
        return self.out_indptr[self._out_starts[etype_id] : self._out_starts[etype_id + 1]]

    def expected_indptr_lengths(self) -> tuple[int, int]:
        """Lengths ``in_indptr`` and ``out_indptr`` must have (for validating a loaded partition)."""
        return int(self._in_starts[-1]), int(self._out_starts[-1])
