"""Contracts of the partition package: feature schemes and one loaded partition.

On-disk layout written by :func:`graphstore.partition.partition_graph` (see docs/partition-format.md):

    OUT/NAME.json            format_version, graph_name, num_nodes, num_edges, num_parts, part_method,
                             node_map {"_N": [[start, end], ...]}, edge_map {"_E": [[start, end], ...]},
                             node_feats / edge_feats {name: {"dtype": "float32", "shape": [100]}},
                             parts: [{"path": "part0"}, ...] (relative to NAME.json)
    OUT/partK/in_indptr.npy  int64 [n_k + 1]: in-edges of local node i are at positions
                             in_indptr[i]:in_indptr[i+1]
    OUT/partK/in_src.npy     int64 [e_k]: global source ID of each in-edge; the edge at position j has
                             global edge ID edge_start_k + j (a partition owns the in-edges of its nodes,
                             sorted by destination)
    OUT/partK/out_indptr.npy int64 [n_k + 1]: out-edges of local node i
    OUT/partK/out_dst.npy    int64: global destination IDs of those out-edges
    OUT/partK/out_eid.npy    int64: their global edge IDs (owned by the destination's partition)
    OUT/partK/orig_nid.npy   int64 [n_k]: original (input) node ID of each local node
    OUT/partK/orig_eid.npy   int64 [e_k]: original edge ID of each local edge
    OUT/partK/node_feat/NAME.npy, OUT/partK/edge_feat/NAME.npy: row-sliced arrays; bfloat16 stored as uint16

Every .npy loads with ``mmap_mode='r'``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

FORMAT_VERSION = 1
DEFAULT_NTYPE = "_N"
DEFAULT_ETYPE = "_E"


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
        node_start, node_end: global node IDs owned here, ``[node_start, node_end)``.
        edge_start, edge_end: global edge IDs owned here (the in-edges of the owned nodes).
        in_indptr, in_src: in-edge CSR by local destination (see module docstring).
        out_indptr, out_dst, out_eid: out-edge CSR by local source.
        node_feats, edge_feats: storage arrays by name (bfloat16 as uint16), rows in local order.
        node_schemes, edge_schemes: the dtype and row shape of each feature.
        orig_nid, orig_eid: original IDs of the local nodes and edges.
        config_path: the NAME.json this was loaded from.
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
    node_feats: dict[str, np.ndarray] = field(default_factory=dict)
    edge_feats: dict[str, np.ndarray] = field(default_factory=dict)
    node_schemes: dict[str, FeatureScheme] = field(default_factory=dict)
    edge_schemes: dict[str, FeatureScheme] = field(default_factory=dict)
    config_path: str = ""

    @property
    def num_local_nodes(self) -> int:
        return self.node_end - self.node_start

    @property
    def num_local_edges(self) -> int:
        return self.edge_end - self.edge_start
