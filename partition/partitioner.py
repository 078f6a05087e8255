"""``partition_graph``: split a graph into partitions, relabel its IDs, and write the partition files.

Steps: assign nodes to partitions (METIS on the symmetrized graph, or random); relabel nodes so
partition ``k`` owns one contiguous ID range (stable: within a partition, original order); give each
edge to its destination's partition and relabel edges so that, inside a partition, they are sorted
by destination (the position in the in-edge CSR is the edge ID); build the out-edge CSR of every
partition's own nodes; slice every node and edge array the same way; write everything into a
temporary folder and rename it into place at the end, so a failure leaves no half-written output.
"""

from __future__ import annotations

import json
import logging
import os
import resource
import shutil
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field

import numpy as np

from graphstore.dtypes import float32_to_bfloat16_bits, name_of
from graphstore.partition.format import EDGE_FEAT_DIR, NODE_FEAT_DIR
from graphstore.partition.graph import GraphData, graph_from_arrays, load_graph, validate_graph
from graphstore.partition.metis import (
    DEFAULT_UFACTOR,
    edge_cut_fraction,
    metis_kway,
    random_assignment,
    repair_balance,
    sort_pairs,
    symmetrize,
)
from graphstore.partition.types import DEFAULT_ETYPE, DEFAULT_NTYPE, FORMAT_VERSION

logger = logging.getLogger(__name__)

METHODS = ("metis", "random")
HALF_FLOAT_DTYPES = ("float16", "bfloat16")
# Allowed imbalance of the categories in balance_ntypes; tighter than METIS's 3% default so that
# small categories (a few dozen training nodes per part) still come out even.
NTYPE_TOLERANCE = 0.02
ROW_CHUNK = 1 << 20  # rows converted or gathered per step, bounding temporary memory


@dataclass
class PartitionResult:
    """What :func:`partition_graph` did.

    Attributes:
        config_path: the written ``NAME.json``.
        num_nodes, num_edges, num_parts: graph and partition counts.
        edge_cut: fraction of directed edges whose endpoints lie in different partitions.
        part_nodes, part_edges: nodes and (in-)edges per partition.
        part_train_nodes: training nodes per partition (empty without a ``train_mask`` node array).
        assign_seconds: time to compute the assignment (METIS with its symmetrization, or random).
        timings: seconds per step: ``load``, ``symmetrize``, ``metis`` (METIS alone), ``balance_repair``,
            ``relabel``, ``write``.
        total_seconds: end to end, files written.
        peak_rss_bytes: peak resident memory of this process so far.
        orig_nid: int64 [N], original node ID of each new node ID.
        orig_eid: int64 [E], original edge ID of each new edge ID.
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
    assign_seconds: float = 0.0
    timings: dict[str, float] = field(default_factory=dict)
    total_seconds: float = 0.0
    peak_rss_bytes: int = 0
    orig_nid: np.ndarray | None = field(default=None, repr=False)
    orig_eid: np.ndarray | None = field(default=None, repr=False)

    def stats(self) -> dict:
        """The figures as a json-serializable dict (without the ID maps)."""
        out = asdict(self)
        out.pop("orig_nid")
        out.pop("orig_eid")
        return out


def peak_rss_bytes() -> int:
    """Peak resident set size of this process (Linux ru_maxrss is in KiB)."""
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024


# ----- node assignment ----------------------------------------------------------------------------


def balance_categories(graph: GraphData, balance_ntypes) -> np.ndarray | None:
    """Turn ``balance_ntypes`` into one integer category per node.

    Args:
        graph: the graph.
        balance_ntypes: None; an int/bool array of length N (one category per node); the name of a
            node array; or a list of names of boolean masks (a node's category is the first mask
            that holds it, or "none of them").

    Returns:
        int64 [N] categories, or None.

    Raises:
        ValueError: an unknown name, a wrong length, or a non-integer array.
    """
    if balance_ntypes is None:
        return None
    if isinstance(balance_ntypes, str):
        balance_ntypes = [balance_ntypes]
    if isinstance(balance_ntypes, (list, tuple)) and all(isinstance(x, str) for x in balance_ntypes):
        for name in balance_ntypes:
            if name not in graph.node_data:
                raise ValueError(
                    f"balance_ntypes names node array {name!r}, which the graph lacks "
                    f"(has {sorted(graph.node_data)})"
                )
        if len(balance_ntypes) == 1:
            return _as_categories(graph.node_data[balance_ntypes[0]], balance_ntypes[0], graph.num_nodes)
        category = np.full(graph.num_nodes, len(balance_ntypes), dtype=np.int64)
        for index in range(len(balance_ntypes) - 1, -1, -1):
            mask = np.asarray(graph.node_data[balance_ntypes[index]])
            if mask.dtype != np.bool_ or mask.ndim != 1:
                raise ValueError(
                    f"balance_ntypes mask {balance_ntypes[index]!r} must be a boolean [N] array, "
                    f"got {mask.dtype}{list(mask.shape)}"
                )
            category[mask] = index
        return category
    return _as_categories(balance_ntypes, "balance_ntypes", graph.num_nodes)


def _as_categories(values, name: str, num_nodes: int) -> np.ndarray:
    if type(values).__module__.startswith("torch"):
        values = values.cpu().numpy()
    arr = np.asarray(values)
    if arr.ndim != 1 or arr.shape[0] != num_nodes:
        raise ValueError(f"{name} must have shape [{num_nodes}], got {list(arr.shape)}")
    if arr.dtype.kind not in "biu":
        raise ValueError(f"{name} must hold integer or boolean categories, got dtype {arr.dtype}")
    return arr.astype(np.int64)


def vertex_weights(
    graph: GraphData, categories: np.ndarray | None, balance_edges: bool
) -> tuple[np.ndarray | None, list[float], int]:
    """The METIS vertex-weight columns for the requested balance and each column's allowed imbalance.

    One indicator column per category (they sum to the node count, so nodes stay balanced too), plus
    the in-degree when ``balance_edges`` (with a node-count column if there are no categories).
    All-zero columns are dropped.

    Returns:
        ``(weights [N, ncon] or None, imbalance per column, number of leading category columns)``.
    """
    columns: list[np.ndarray] = []
    imbalance: list[float] = []
    if categories is not None:
        _, category_index = np.unique(categories, return_inverse=True)
        for value in range(int(category_index.max()) + 1 if category_index.size else 0):
            columns.append((category_index == value).astype(np.int64))
            imbalance.append(1.0 + NTYPE_TOLERANCE)
    num_categories = len(columns) if categories is not None else 0
    if balance_edges:
        if not columns:
            columns.append(np.ones(graph.num_nodes, dtype=np.int64))
            imbalance.append(1.0 + DEFAULT_UFACTOR / 1000)
        in_degree = np.bincount(np.asarray(graph.dst), minlength=graph.num_nodes).astype(np.int64)
        if in_degree.any():  # an edgeless graph has nothing to balance
            columns.append(in_degree)
            imbalance.append(1.0 + DEFAULT_UFACTOR / 1000)
    if not columns:
        return None, [], 0
    return np.stack(columns, axis=1), imbalance, num_categories


def assign_partitions(
    graph: GraphData,
    num_parts: int,
    part_method: str = "metis",
    balance_ntypes=None,
    balance_edges: bool = False,
    seed: int = 0,
    timings: dict[str, float] | None = None,
) -> np.ndarray:
    """Partition index of every node.

    Args:
        graph: the graph.
        num_parts: number of partitions, ``1 <= num_parts <= num_nodes``.
        part_method: ``'metis'`` or ``'random'``.
        balance_ntypes: categories to spread evenly (see :func:`balance_categories`); METIS only.
        balance_edges: also balance in-edges per partition; METIS only.
        seed: random seed (METIS's seed too).
        timings: if given, receives the seconds spent in ``symmetrize``, ``metis`` and ``balance_repair``.

    Returns:
        int64 [N] partition per node.

    Raises:
        ValueError: bad ``num_parts`` or ``part_method``.
    """
    _check_num_parts(num_parts, graph.num_nodes)
    _check_method(part_method)
    if num_parts == 1:
        return np.zeros(graph.num_nodes, dtype=np.int64)
    if part_method == "random":
        return random_assignment(graph.num_nodes, num_parts, seed)
    categories = balance_categories(graph, balance_ntypes)
    weights, imbalance, num_categories = vertex_weights(graph, categories, balance_edges)
    timings = {} if timings is None else timings
    start = time.perf_counter()
    csr = symmetrize(graph.src, graph.dst, graph.num_nodes)
    timings["symmetrize"] = time.perf_counter() - start
    start = time.perf_counter()
    part, _ = metis_kway(
        csr, num_parts, weights, seed=seed, imbalance=imbalance if weights is not None else None
    )
    timings["metis"] = time.perf_counter() - start
    if num_categories:
        # Only the category columns are required to come out even; in-degree balance stays a METIS goal.
        start = time.perf_counter()
        part = repair_balance(csr, part, weights[:, :num_categories], num_parts, tolerance=NTYPE_TOLERANCE)
        timings["balance_repair"] = time.perf_counter() - start
    empty = np.flatnonzero(np.bincount(part, minlength=num_parts) == 0)
    if empty.size:
        logger.warning(
            "METIS left partitions %s empty (num_parts=%d, num_nodes=%d)",
            empty.tolist(),
            num_parts,
            graph.num_nodes,
        )
    return part


def _check_num_parts(num_parts, num_nodes: int) -> None:
    if isinstance(num_parts, bool) or not isinstance(num_parts, (int, np.integer)):
        raise ValueError(f"num_parts must be an integer, got {num_parts!r}")
    if num_parts < 1:
        raise ValueError(f"num_parts must be >= 1, got {num_parts}")
    if num_parts > num_nodes:
        raise ValueError(f"num_parts={num_parts} exceeds num_nodes={num_nodes}")


def _check_method(part_method: str) -> None:
    if part_method not in METHODS:
        raise ValueError(f"unknown part_method {part_method!r}; expected one of {list(METHODS)}")


# ----- relabeling ---------------------------------------------------------------------------------


@dataclass
class Relabeling:
    """New IDs of a partitioned graph.

    Attributes:
        node_bounds, edge_bounds: ``num_parts + 1`` range boundaries.
        orig_nid: int64 [N], original ID of each new node ID.
        orig_eid: int64 [E], original ID of each new edge ID.
        new_src, new_dst: int64 [E], new endpoint IDs indexed by new edge ID (``new_dst`` is sorted).
        in_indptr: int64 [N + 1], in-edge CSR over new node IDs (positions are new edge IDs).
        out_eid: int64 [E], new edge IDs sorted by (new source, new edge ID).
        out_indptr: int64 [N + 1], out-edge CSR over new node IDs (positions index ``out_eid``).
    """

    node_bounds: np.ndarray
    edge_bounds: np.ndarray
    orig_nid: np.ndarray
    orig_eid: np.ndarray
    new_src: np.ndarray
    new_dst: np.ndarray
    in_indptr: np.ndarray
    out_eid: np.ndarray
    out_indptr: np.ndarray


def _csr_indptr(sorted_rows: np.ndarray, num_rows: int) -> np.ndarray:
    indptr = np.zeros(num_rows + 1, dtype=np.int64)
    np.cumsum(np.bincount(sorted_rows, minlength=num_rows), out=indptr[1:])
    return indptr


def relabel(part: np.ndarray, src: np.ndarray, dst: np.ndarray, num_parts: int) -> Relabeling:
    """Relabel nodes and edges so that each partition owns contiguous ranges.

    Args:
        part: int64 [N] partition per node.
        src, dst: original edge endpoints.
        num_parts: number of partitions.

    Returns:
        The :class:`Relabeling`.
    """
    num_nodes = int(part.shape[0])
    num_edges = int(src.shape[0])
    _, orig_nid = sort_pairs(part, np.arange(num_nodes, dtype=np.int64), num_nodes)
    node_bounds = np.zeros(num_parts + 1, dtype=np.int64)
    np.cumsum(np.bincount(part, minlength=num_parts), out=node_bounds[1:])
    new_of_orig = np.empty(num_nodes, dtype=np.int64)
    new_of_orig[orig_nid] = np.arange(num_nodes, dtype=np.int64)

    # Edges sorted by new destination, then original edge ID: the position is the new edge ID.
    edge_ids = np.arange(num_edges, dtype=np.int64)
    new_dst, orig_eid = sort_pairs(new_of_orig[np.asarray(dst)], edge_ids, num_edges)
    new_src = new_of_orig[np.asarray(src)[orig_eid]]
    del new_of_orig
    in_indptr = _csr_indptr(new_dst, num_nodes)
    edge_bounds = in_indptr[node_bounds]

    sorted_src, out_eid = sort_pairs(new_src, edge_ids, num_edges)
    del edge_ids
    out_indptr = _csr_indptr(sorted_src, num_nodes)
    del sorted_src
    return Relabeling(
        node_bounds=node_bounds,
        edge_bounds=edge_bounds,
        orig_nid=orig_nid,
        orig_eid=orig_eid,
        new_src=new_src,
        new_dst=new_dst,
        in_indptr=in_indptr,
        out_eid=out_eid,
        out_indptr=out_indptr,
    )


# ----- feature storage ----------------------------------------------------------------------------


def storage_dtype_name(array: np.ndarray, name: str, feat_dtype: str | None) -> str:
    """Canonical dtype an input array is stored as.

    ``feat_dtype`` applies to floating feature matrices (two or more dimensions); one-dimensional
    float arrays (edge weights, sampling probabilities) keep their dtype.

    Raises:
        ValueError: the array's dtype is not one graphstore stores.
    """
    if array.dtype.kind == "f" and array.ndim >= 2 and feat_dtype is not None:
        return feat_dtype
    try:
        return name_of(array.dtype)
    except ValueError:
        raise ValueError(f"array {name!r} has dtype {array.dtype}, which graphstore cannot store") from None


def convert_rows(rows: np.ndarray, dtype_name: str) -> np.ndarray:
    """Rows converted to the storage form of ``dtype_name`` (bfloat16 as uint16 bits)."""
    if dtype_name == "bfloat16":
        return float32_to_bfloat16_bits(rows)
    from graphstore.dtypes import info

    return np.ascontiguousarray(rows, dtype=info(dtype_name).storage)


def _write_rows(path: str, source: np.ndarray, index: np.ndarray, dtype_name: str) -> None:
    """Write ``convert(source[index])`` to a .npy, in chunks of rows."""
    from graphstore.dtypes import info

    shape = (int(index.shape[0]), *source.shape[1:])
    out = np.lib.format.open_memmap(path, mode="w+", dtype=info(dtype_name).storage, shape=shape)
    row_bytes = max(1, int(np.prod(source.shape[1:], dtype=np.int64)) * source.dtype.itemsize)
    chunk = max(1, (64 << 20) // row_bytes)
    for start in range(0, shape[0], chunk):
        out[start : start + chunk] = convert_rows(
            np.asarray(source[index[start : start + chunk]]), dtype_name
        )
    out.flush()
    del out


def _save(path: str, array: np.ndarray) -> None:
    np.save(path, np.ascontiguousarray(array))


# ----- the whole job ------------------------------------------------------------------------------


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


def check_output_folder(out_path: str, overwrite: bool) -> None:
    """Check that ``out_path`` can receive partition output.

    Raises:
        FileExistsError: it is a file, or a non-empty folder and not ``overwrite``.
    """
    if os.path.exists(out_path):
        if not os.path.isdir(out_path):
            raise FileExistsError(f"output path {out_path!r} exists and is not a folder")
        if os.listdir(out_path) and not overwrite:
            raise FileExistsError(
                f"output folder {out_path!r} exists and is not empty; pass overwrite=True (--overwrite)"
            )


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
) -> PartitionResult:
    """Partition a graph and write the partition files (``out_path/graph_name.json`` + ``partK/``).

    Args:
        graph: a :class:`GraphData`, a dict of arrays shaped like an input ``.npz``, or the path of a
            ``.npz`` / edge-list file.
        graph_name: the graph's name (also the config file's name); letters, digits, ``-_.``.
        num_parts: number of partitions, ``1 <= num_parts <= num_nodes``.
        out_path: output folder; created; it must be absent or empty unless ``overwrite``.
        num_hops: accepted for DGL compatibility; only 1 (a partition holds every in-edge of its nodes).
        part_method: ``'metis'`` or ``'random'``.
        balance_ntypes: spread these node categories evenly: an int/bool [N] array, the name of a node
            array (e.g. ``'train_mask'``), or a list of boolean mask names (METIS only).
        balance_edges: also balance in-edges per partition (METIS only).
        feat_dtype: ``'float16'`` or ``'bfloat16'`` to store floating feature matrices (node or edge
            arrays with two or more dimensions) at half width; 1-D float arrays keep their dtype.
        seed: seed of the random assignment and of METIS.
        overwrite: replace an existing, non-empty output folder.

    Returns:
        A :class:`PartitionResult` with the config path, statistics and the new->original ID maps.

    Raises:
        FileNotFoundError: ``graph`` names a missing file.
        FileExistsError: ``out_path`` exists and is not empty, without ``overwrite``.
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
    if num_hops != 1:
        raise ValueError(
            f"num_hops={num_hops} is not supported; partitions hold the in-edges of their nodes (1 hop)"
        )
    _check_method(part_method)
    if feat_dtype is not None and feat_dtype not in HALF_FLOAT_DTYPES + ("float32",):
        raise ValueError(
            f"feat_dtype must be one of {list(HALF_FLOAT_DTYPES + ('float32',))} or None, got {feat_dtype!r}"
        )
    if part_method == "random" and (balance_ntypes is not None or balance_edges):
        logger.info("balance_ntypes / balance_edges apply to METIS only; random assignment is already even")
    check_output_folder(out_path, overwrite)

    timings: dict[str, float] = {}
    if isinstance(graph, (str, os.PathLike)):
        step = time.perf_counter()
        graph = load_graph(os.fspath(graph))
        timings["load"] = time.perf_counter() - step
    elif isinstance(graph, dict):
        graph = graph_from_arrays(graph)
    elif isinstance(graph, GraphData):
        validate_graph(graph)
    else:
        raise TypeError(
            f"graph must be a GraphData, a dict of arrays or a file path, got {type(graph).__name__}"
        )
    _check_num_parts(num_parts, graph.num_nodes)
    dtype_names = {
        **{("node", k): storage_dtype_name(v, k, feat_dtype) for k, v in graph.node_data.items()},
        **{("edge", k): storage_dtype_name(v, k, feat_dtype) for k, v in graph.edge_data.items()},
    }

    assign_start = time.perf_counter()
    part = assign_partitions(graph, num_parts, part_method, balance_ntypes, balance_edges, seed, timings)
    assign_seconds = time.perf_counter() - assign_start
    logger.info("assigned %d nodes to %d partitions in %.2fs", graph.num_nodes, num_parts, assign_seconds)
    edge_cut = edge_cut_fraction(graph.src, graph.dst, part)
    train_counts: list[int] = []
    if "train_mask" in graph.node_data:
        train = np.asarray(graph.node_data["train_mask"]).astype(bool)
        train_counts = np.bincount(part[train], minlength=num_parts).tolist()

    step = time.perf_counter()
    labels = relabel(part, graph.src, graph.dst, num_parts)
    del part
    timings["relabel"] = time.perf_counter() - step

    parent = os.path.dirname(os.path.abspath(out_path)) or "."
    os.makedirs(parent, exist_ok=True)
    tmp_dir = tempfile.mkdtemp(prefix=f".{os.path.basename(os.path.abspath(out_path))}.tmp-", dir=parent)
    os.chmod(tmp_dir, 0o755)  # mkdtemp's 0700 would hide the partitions from servers run as other users
    try:
        extra = {
            "stats": {"edge_cut": edge_cut, "train_nodes": train_counts, "seed": seed},
            "balance": {"ntypes": _describe_balance(balance_ntypes), "edges": bool(balance_edges)},
        }
        step = time.perf_counter()
        _write_partitions(graph, graph_name, num_parts, part_method, labels, dtype_names, tmp_dir, extra)
        timings["write"] = time.perf_counter() - step
        _replace_folder(tmp_dir, out_path)
    except BaseException:
        shutil.rmtree(tmp_dir, ignore_errors=True)
        raise

    config_path = os.path.join(out_path, f"{graph_name}.json")
    return PartitionResult(
        config_path=config_path,
        num_nodes=graph.num_nodes,
        num_edges=graph.num_edges,
        num_parts=num_parts,
        part_method=part_method,
        edge_cut=edge_cut,
        part_nodes=np.diff(labels.node_bounds).tolist(),
        part_edges=np.diff(labels.edge_bounds).tolist(),
        part_train_nodes=train_counts,
        assign_seconds=assign_seconds,
        timings={k: round(v, 3) for k, v in timings.items()},
        total_seconds=time.perf_counter() - start_time,
        peak_rss_bytes=peak_rss_bytes(),
        orig_nid=labels.orig_nid,
        orig_eid=labels.orig_eid,
    )


def _replace_folder(tmp_dir: str, out_path: str) -> None:
    """Move the finished ``tmp_dir`` to ``out_path``, replacing an existing folder there."""
    if os.path.isdir(out_path) and os.listdir(out_path):
        trash = tempfile.mkdtemp(
            prefix=f".{os.path.basename(os.path.abspath(out_path))}.old-", dir=os.path.dirname(tmp_dir)
        )
        os.rename(out_path, os.path.join(trash, "old"))
        os.rename(tmp_dir, out_path)
        shutil.rmtree(trash, ignore_errors=True)
    else:
        if os.path.isdir(out_path):
            os.rmdir(out_path)
        os.rename(tmp_dir, out_path)


def _write_partitions(
    graph: GraphData,
    graph_name: str,
    num_parts: int,
    part_method: str,
    labels: Relabeling,
    dtype_names: dict[tuple[str, str], str],
    out_dir: str,
    extra: dict,
) -> None:
    parts_meta = []
    for k in range(num_parts):
        ns, ne = int(labels.node_bounds[k]), int(labels.node_bounds[k + 1])
        es, ee = int(labels.edge_bounds[k]), int(labels.edge_bounds[k + 1])
        os_, oe = int(labels.out_indptr[ns]), int(labels.out_indptr[ne])
        part_dir = os.path.join(out_dir, f"part{k}")
        os.makedirs(os.path.join(part_dir, NODE_FEAT_DIR))
        os.makedirs(os.path.join(part_dir, EDGE_FEAT_DIR))
        _save(os.path.join(part_dir, "in_indptr.npy"), labels.in_indptr[ns : ne + 1] - labels.in_indptr[ns])
        _save(os.path.join(part_dir, "in_src.npy"), labels.new_src[es:ee])
        _save(
            os.path.join(part_dir, "out_indptr.npy"), labels.out_indptr[ns : ne + 1] - labels.out_indptr[ns]
        )
        out_eid = labels.out_eid[os_:oe]
        _save(os.path.join(part_dir, "out_dst.npy"), labels.new_dst[out_eid])
        _save(os.path.join(part_dir, "out_eid.npy"), out_eid)
        _save(os.path.join(part_dir, "orig_nid.npy"), labels.orig_nid[ns:ne])
        _save(os.path.join(part_dir, "orig_eid.npy"), labels.orig_eid[es:ee])
        for name, arr in graph.node_data.items():
            path = os.path.join(part_dir, NODE_FEAT_DIR, f"{name}.npy")
            _write_rows(path, arr, labels.orig_nid[ns:ne], dtype_names[("node", name)])
        for name, arr in graph.edge_data.items():
            path = os.path.join(part_dir, EDGE_FEAT_DIR, f"{name}.npy")
            _write_rows(path, arr, labels.orig_eid[es:ee], dtype_names[("edge", name)])
        parts_meta.append(
            {"path": f"part{k}", "num_nodes": ne - ns, "num_edges": ee - es, "num_out_edges": oe - os_}
        )
    config = {
        "format_version": FORMAT_VERSION,
        "graph_name": graph_name,
        "num_nodes": graph.num_nodes,
        "num_edges": graph.num_edges,
        "num_parts": num_parts,
        "part_method": part_method,
        "halo_hops": 1,
        "ntypes": {DEFAULT_NTYPE: 0},
        "etypes": {DEFAULT_ETYPE: 0},
        "node_map": {DEFAULT_NTYPE: _ranges(labels.node_bounds)},
        "edge_map": {DEFAULT_ETYPE: _ranges(labels.edge_bounds)},
        "node_feats": {
            name: {"dtype": dtype_names[("node", name)], "shape": list(arr.shape[1:])}
            for name, arr in graph.node_data.items()
        },
        "edge_feats": {
            name: {"dtype": dtype_names[("edge", name)], "shape": list(arr.shape[1:])}
            for name, arr in graph.edge_data.items()
        },
        "parts": parts_meta,
        **extra,
    }
    with open(os.path.join(out_dir, f"{graph_name}.json"), "w") as fh:
        json.dump(config, fh, indent=1)


def _describe_balance(balance_ntypes) -> object:
    if balance_ntypes is None or isinstance(balance_ntypes, str):
        return balance_ntypes
    if isinstance(balance_ntypes, (list, tuple)) and all(isinstance(x, str) for x in balance_ntypes):
        return list(balance_ntypes)
    return "array"


def _ranges(bounds: np.ndarray) -> list[list[int]]:
    return [[int(bounds[k]), int(bounds[k + 1])] for k in range(bounds.size - 1)]


def map_back_nodes(orig_nid: np.ndarray, new_ids: np.ndarray | Sequence[int]) -> np.ndarray:
    """Original node IDs of new node IDs (``orig_nid[new_ids]``)."""
    return np.asarray(orig_nid)[np.asarray(new_ids, dtype=np.int64)]
