"""``partition_graph``: split a graph into partitions, relabel its IDs, and write the partition files.

Steps, each in its own module: assign nodes to partitions (:mod:`~graphstore.partition.assignment`:
METIS on the symmetrized graph, or random); relabel nodes and edges so that each partition owns one
contiguous range of each (:mod:`~graphstore.partition.relabel`); slice every node and edge array the
same way and write everything into a temporary folder that is renamed into place at the end, so a
failure leaves no half-written output (:mod:`~graphstore.partition.writer`).
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import asdict, dataclass, field

import numpy as np

from graphstore.partition.array_input import graph_from_arrays
from graphstore.partition.assignment import (
    assign_partitions,
    check_method,
    check_num_parts,
    edge_cut_fraction,
)
from graphstore.partition.graph import GraphData, validate_graph
from graphstore.partition.graph_files import load_graph
from graphstore.partition.input_adapters import graph_from_object, is_graph_object, rename_arrays
from graphstore.partition.memory import PhaseMeter
from graphstore.partition.relabel import relabel
from graphstore.partition.writer import (
    HALF_FLOAT_DTYPES,
    check_output_folder,
    staged_output_folder,
    storage_dtype_name,
    write_config,
    write_partitions,
)

logger = logging.getLogger(__name__)


@dataclass
class PartitionResult:
    """What :func:`partition_graph` did.

    Attributes:
        config_path: the written ``NAME.json``.
        num_nodes, num_edges, num_parts: graph and partition counts.
        edge_cut: fraction of directed edges whose endpoints lie in different partitions.
        part_nodes, part_edges: nodes and (in-)edges per partition.
        part_train_nodes: training nodes per partition (empty without a ``train_mask`` node array).
        part_type_nodes: per node type, its nodes in each partition.
        assign_seconds: time to compute the assignment (METIS with its symmetrization, or random).
        timings: wall-clock seconds per phase: ``load``, ``symmetrize``, ``metis`` (METIS alone),
            ``balance_repair``, ``random``, ``edge_cut``, ``relabel``, ``write``, ``id_maps``.
        cpu_timings: CPU seconds per phase (what the wall time would be on an idle machine).
        total_seconds: end to end, files written.
        peak_rss_bytes: peak resident memory of this process during the run (the largest phase peak).
        phase_peak_rss_bytes: peak resident memory during each phase (see
            :class:`~graphstore.partition.memory.PhaseMeter`; the process's ``ru_maxrss`` afterwards covers
            only the last phase).
        orig_nid: int64 [N], original node ID of each new node ID (homogeneous IDs; on a typed graph
            the input's homogeneous IDs, types one after another).
        orig_eid: int64 [E], original edge ID of each new edge ID.
        orig_nids_per_type: per node type, the original per-type ID of each new per-type ID.
        orig_eids_per_type: per canonical edge type (``"src:etype:dst"``), the same for edges.
    """

    config_path: str
    num_nodes: int
    num_edges: int
    num_parts: int
    part_method: str
    edge_cut: float
    part_nodes: list[int]
    part_edges: list[int]
    part_train_nodes: list[int] = field(default_factory=list)
    part_type_nodes: dict[str, list[int]] = field(default_factory=dict)
    assign_seconds: float = 0.0
    timings: dict[str, float] = field(default_factory=dict)
    cpu_timings: dict[str, float] = field(default_factory=dict)
    total_seconds: float = 0.0
    peak_rss_bytes: int = 0
    phase_peak_rss_bytes: dict[str, int] = field(default_factory=dict)
    orig_nid: np.ndarray | None = field(default=None, repr=False)
    orig_eid: np.ndarray | None = field(default=None, repr=False)
    orig_nids_per_type: dict[str, np.ndarray] = field(default_factory=dict, repr=False)
    orig_eids_per_type: dict[str, np.ndarray] = field(default_factory=dict, repr=False)

    def stats(self) -> dict:
        """The figures as a json-serializable dict (without the ID maps)."""
        out = asdict(self)
        for key in ("orig_nid", "orig_eid", "orig_nids_per_type", "orig_eids_per_type"):
            out.pop(key)
        return out


@dataclass
class PartitionJob:
    """Options of :func:`partition_graph` (the CLI's ``graphstore partition`` flags).

    Attributes:
        graph_name: name recorded in the config; the config file is ``out_path/graph_name.json``.
        num_parts: number of partitions.
        out_path: output folder (created; must not exist unless ``overwrite``).
        part_method: ``'metis'`` or ``'random'``.
        balance_ntypes: categories to spread evenly (see :func:`balance_categories`).
        balance_edges: balance in-edges per partition.
        feat_dtype: store floating feature matrices (ndim >= 2) as ``'float16'`` or ``'bfloat16'``
            (None keeps them).
        seed: random seed.
        overwrite: replace an existing output folder.
    """

    graph_name: str
    num_parts: int
    out_path: str
    part_method: str = "metis"
    balance_ntypes: object = None
    balance_edges: bool = False
    feat_dtype: str | None = None
    seed: int = 0
    overwrite: bool = False


def partition_graph(
    graph: GraphData | dict | str,
    graph_name: str,
    num_parts: int,
    out_path: str,
    num_hops: int = 1,
    part_method: str = "metis",
    balance_ntypes=None,
    balance_edges: bool = False,
    feat_dtype: str | None = None,
    seed: int = 0,
    overwrite: bool = False,
    ndata_map: dict[str, str] | None = None,
    edata_map: dict[str, str] | None = None,
    write_over: bool = False,
    assignment: np.ndarray | None = None,
    keep_edge_ids: bool | None = None,
) -> PartitionResult:
    """Partition a graph and write the partition files (``out_path/graph_name.json`` + ``partK/``).

    Args:
        graph: a :class:`GraphData`, a dict of arrays shaped like an input ``.npz``, the path of a
            ``.npz`` / edge-list file, or an in-memory DGL graph or PyG ``Data`` / ``HeteroData``
            (read by their interface, see :mod:`graphstore.partition.input_adapters`).
        graph_name: the graph's name (also the config file's name); letters, digits, ``-_.``.
        num_parts: number of partitions, ``1 <= num_parts <= num_nodes``.
        out_path: output folder; created; it must be absent or empty unless ``overwrite``.
        num_hops: DGL's halo depth, recorded as ``halo_hops``: a partition's files hold the in-edges of its
            nodes whatever the depth (sampling reads deeper hops from the other partitions); DGL's
            ``load_partition`` view (:mod:`graphstore.compat.dgl`) builds a graph with that halo.
        part_method: ``'metis'`` or ``'random'``.
        balance_ntypes: spread these node categories evenly: an int/bool [N] array, the name of a node
            array (e.g. ``'train_mask'``), or a list of boolean mask names (METIS only).
        balance_edges: also balance in-edges per partition (METIS only).
        feat_dtype: ``'float16'`` or ``'bfloat16'`` to store floating feature matrices (node or edge
            arrays with two or more dimensions) at half width; 1-D float arrays keep their dtype.
        seed: seed of the random assignment and of METIS.
        overwrite: replace an existing, non-empty output folder.
        ndata_map, edata_map: rename node / edge arrays on the way in, ``{old: new}`` (see
            :func:`~graphstore.partition.input_adapters.rename_arrays`).
        write_over: write into an existing, non-empty output folder, replacing only the entries
            written (``NAME.json`` and the ``partK`` folders) and keeping the others (DGL's way);
            ``overwrite`` replaces the whole folder instead.
        assignment: the partition of every node (int [N], the input's homogeneous IDs: a typed graph's
            types one after another) instead of computing one with ``part_method`` (recorded as is).
        keep_edge_ids: number each partition's edges of a type in the input's order rather than by
            destination (default: with one partition, which then keeps every input edge ID, as DGL).

    Returns:
        A :class:`PartitionResult` with the config path, statistics and the new->original ID maps.

    Raises:
        FileNotFoundError: ``graph`` names a missing file.
        FileExistsError: ``out_path`` exists and is not empty, without ``overwrite`` or ``write_over``.
        ValueError: any invalid argument or graph (the message names it).
    """
    start_time = time.perf_counter()
    if (
        not isinstance(graph_name, str)
        or not graph_name
        or not all(c.isalnum() or c in "-_." for c in graph_name)
    ):
        raise ValueError(
            f"graph_name must be a non-empty string of letters, digits, '-', '_', '.', got {graph_name!r}"
        )
    check_num_hops(num_hops)
    check_method(part_method)
    if feat_dtype is not None and feat_dtype not in HALF_FLOAT_DTYPES + ("float32",):
        raise ValueError(
            f"feat_dtype must be one of {list(HALF_FLOAT_DTYPES + ('float32',))} or None, got {feat_dtype!r}"
        )
    if part_method == "random" and (balance_ntypes is not None or balance_edges):
        logger.info("balance_ntypes / balance_edges apply to METIS only; random assignment is already even")
    check_output_folder(out_path, overwrite or write_over)

    meter = PhaseMeter()
    if isinstance(graph, (str, os.PathLike)):
        with meter.phase("load"):
            graph = load_graph(os.fspath(graph))
    elif isinstance(graph, dict):
        graph = graph_from_arrays(graph)
    elif isinstance(graph, GraphData):
        validate_graph(graph)
    elif is_graph_object(graph):
        graph = graph_from_object(graph)
    else:
        raise TypeError(
            "graph must be a GraphData, a dict of arrays, a file path, a DGL graph or a PyG Data / "
            f"HeteroData, got {type(graph).__name__}"
        )
    if ndata_map or edata_map:
        graph = rename_arrays(graph, ndata_map, edata_map)
    check_num_parts(num_parts, graph.num_nodes)
    dtype_names = {
        **{("node", t, k): storage_dtype_name(v, k, feat_dtype) for t, k, v in graph.node_arrays()},
        **{("edge", t, k): storage_dtype_name(v, k, feat_dtype) for t, k, v in graph.edge_arrays()},
    }

    assign_start = time.perf_counter()
    if assignment is not None:
        part = _checked_assignment(assignment, graph.num_nodes, num_parts)
    elif part_method == "random" or num_parts == 1:
        with meter.phase("random" if num_parts > 1 else "assign"):
            part = assign_partitions(graph, num_parts, part_method, balance_ntypes, balance_edges, seed)
    else:
        part = assign_partitions(graph, num_parts, part_method, balance_ntypes, balance_edges, seed, meter)
    assign_seconds = time.perf_counter() - assign_start
    logger.info("assigned %d nodes to %d partitions in %.2fs", graph.num_nodes, num_parts, assign_seconds)
    with meter.phase("edge_cut"):
        edge_cut = edge_cut_fraction(graph.src, graph.dst, part)
        train_counts = _train_counts(graph, part, num_parts)

    typed_edges = len(graph.schema.canonical_etypes) > 1
    with meter.phase("relabel"):
        labels = relabel(
            part,
            graph.src,
            graph.dst,
            num_parts,
            node_type=graph.node_type_of(),
            num_ntypes=len(graph.schema.ntypes),
            edge_type=graph.edge_type_of() if typed_edges else None,
            num_etypes=len(graph.schema.canonical_etypes),
            keep_edge_ids=num_parts == 1 if keep_edge_ids is None else bool(keep_edge_ids),
        )
        del part

    extra = {
        "halo_hops": int(num_hops),
        "stats": {"edge_cut": edge_cut, "train_nodes": train_counts, "seed": seed},
        "balance": {"ntypes": _describe_balance(balance_ntypes), "edges": bool(balance_edges)},
    }
    with staged_output_folder(out_path, write_over=write_over and not overwrite) as tmp_dir:
        with meter.phase("write"):
            config = write_partitions(
                graph, graph_name, num_parts, part_method, labels, dtype_names, tmp_dir, extra
            )
        # The partition arrays are on disk: only the ID maps the result returns are kept.
        bounds = (labels.node_bounds, labels.edge_bounds, labels.ntype_counts, labels.etype_counts)
        orig_nid, orig_eid = labels.orig_nid, labels.orig_eid
        del labels
        with meter.phase("id_maps"):
            orig_eid = orig_eid.astype(np.int64, copy=False)
            mappings = _per_type_mappings(graph, orig_nid, orig_eid, *bounds)
        config["stats"]["phases"] = meter.report()
        write_config(tmp_dir, config)

    node_bounds, edge_bounds, ntype_counts, _ = bounds
    config_path = os.path.join(out_path, f"{graph_name}.json")
    return PartitionResult(
        config_path=config_path,
        num_nodes=graph.num_nodes,
        num_edges=graph.num_edges,
        num_parts=num_parts,
        part_method=part_method,
        edge_cut=edge_cut,
        part_nodes=np.diff(node_bounds).tolist(),
        part_edges=np.diff(edge_bounds).tolist(),
        part_train_nodes=train_counts,
        part_type_nodes={ntype: ntype_counts[:, t].tolist() for t, ntype in enumerate(graph.schema.ntypes)},
        assign_seconds=assign_seconds,
        timings={k: round(v, 3) for k, v in meter.seconds.items()},
        cpu_timings={k: round(v, 3) for k, v in meter.cpu_seconds.items()},
        total_seconds=time.perf_counter() - start_time,
        peak_rss_bytes=meter.run_peak(),
        phase_peak_rss_bytes=dict(meter.peak_bytes),
        orig_nid=orig_nid,
        orig_eid=orig_eid,
        **mappings,
    )


def _checked_assignment(assignment, num_nodes: int, num_parts: int) -> np.ndarray:
    """A given node -> partition assignment as an int64 array.

    Raises:
        ValueError: a wrong length or a partition outside ``[0, num_parts)``.
    """
    part = np.asarray(assignment)
    if part.shape != (num_nodes,) or not np.issubdtype(part.dtype, np.integer):
        raise ValueError(
            f"assignment must be an integer array of shape [{num_nodes}], got {part.dtype}{part.shape}"
        )
    if part.size and (int(part.min()) < 0 or int(part.max()) >= num_parts):
        raise ValueError(f"assignment holds partitions outside [0, {num_parts})")
    return part.astype(np.int64, copy=False)


def check_num_hops(num_hops) -> None:
    """Raises ValueError for a ``num_hops`` that is not a positive integer."""
    if isinstance(num_hops, bool) or not isinstance(num_hops, (int, np.integer)) or num_hops < 1:
        raise ValueError(f"num_hops must be a positive integer, got {num_hops!r}")


def _per_type_mappings(
    graph: GraphData,
    orig_nid: np.ndarray,
    orig_eid: np.ndarray,
    node_bounds: np.ndarray,
    edge_bounds: np.ndarray,
    ntype_counts: np.ndarray,
    etype_counts: np.ndarray,
) -> dict[str, dict[str, np.ndarray]]:
    """New per-type ID -> original per-type ID, for every node and edge type (DGL's ``return_mapping``).

    A homogeneous graph's per-type IDs are its IDs: the maps are ``orig_nid`` and ``orig_eid``
    themselves, not copies.
    """
    from graphstore.partition.book import RangePartitionBook
    from graphstore.types import etype_key

    schema = graph.schema
    if schema.is_homogeneous:
        return {
            "orig_nids_per_type": {schema.ntypes[0]: orig_nid},
            "orig_eids_per_type": {etype_key(schema.canonical_etypes[0]): orig_eid},
        }
    book = RangePartitionBook(
        node_bounds, edge_bounds, schema=schema, ntype_counts=ntype_counts, etype_counts=etype_counts
    )
    nodes, edges = {}, {}
    for t, ntype in enumerate(schema.ntypes):
        homo = book.map_to_homo_nid(np.arange(graph.nodes_per_type[t], dtype=np.int64), ntype)
        nodes[ntype] = orig_nid[homo] - graph.node_offsets[t]
    for e, canonical in enumerate(schema.canonical_etypes):
        homo = book.map_to_homo_eid(np.arange(graph.edges_per_type[e], dtype=np.int64), canonical)
        edges[etype_key(canonical)] = orig_eid[homo] - graph.edge_offsets[e]
    return {"orig_nids_per_type": nodes, "orig_eids_per_type": edges}


def _train_counts(graph: GraphData, part: np.ndarray, num_parts: int) -> list[int]:
    """Training nodes (``train_mask`` of any type) per partition; empty without a ``train_mask``."""
    counts = np.zeros(num_parts, dtype=np.int64)
    found = False
    offsets = graph.node_offsets
    for ntype, name, arr in graph.node_arrays():
        if name != "train_mask":
            continue
        found = True
        t = graph.schema.ntype_id(ntype)
        train = np.flatnonzero(np.asarray(arr).astype(bool)) + offsets[t]
        counts += np.bincount(part[train], minlength=num_parts)
    return counts.tolist() if found else []


def _describe_balance(balance_ntypes) -> object:
    """How ``balance_ntypes`` is recorded in the config (names as given; an array as ``"array"``)."""
    if balance_ntypes is None or isinstance(balance_ntypes, str):
        return balance_ntypes
    if isinstance(balance_ntypes, (list, tuple)) and all(isinstance(x, str) for x in balance_ntypes):
        return list(balance_ntypes)
    return "array"
