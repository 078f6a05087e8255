"""Test helpers: small generated or Cora graphs, partitioned on disk, with their original arrays.

Every package's tests use these to get real partition files (the same code path as ``graphstore
partition``) and the original arrays to check results against::

    from tests.utils.graphs import make_partitioned_graph, partition_cora, to_original

    config_path, graph = make_partitioned_graph(tmp_path, num_nodes=500, num_parts=2)
    # graph["src"], graph["dst"], graph["feat"], graph["label"], graph["train_mask"], ... (original IDs)
    # result maps: graph["orig_nid"][new_id] == original node ID, graph["orig_eid"] likewise for edges
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from graphstore.partition import partition_graph
from graphstore.partition.generate import GeneratorConfig, generate_graph

REPO_ROOT = Path(__file__).resolve().parents[2]
CORA_PATHS = (REPO_ROOT / "datasets" / "cora.npz", REPO_ROOT.parent / "shared" / "datasets" / "cora.npz")


def make_graph(
    num_nodes: int = 1000,
    avg_degree: float = 8.0,
    feat_dim: int = 16,
    num_classes: int = 4,
    seed: int = 0,
) -> dict[str, np.ndarray]:
    """A generated graph's arrays (``graphstore generate``'s model), original IDs.

    Returns:
        ``src``, ``dst``, ``feat`` (float32), ``label``, ``community``, ``train_mask``, ``val_mask``,
        ``test_mask``.
    """
    cfg = GeneratorConfig(
        num_nodes=num_nodes, avg_degree=avg_degree, feat_dim=feat_dim, num_classes=num_classes, seed=seed
    )
    return generate_graph(cfg)


def make_partitioned_graph(
    tmp_dir: str | os.PathLike,
    num_nodes: int = 1000,
    num_parts: int = 2,
    avg_degree: float = 8.0,
    feat_dim: int = 16,
    seed: int = 0,
    method: str = "random",
    feat_dtype: str = "float32",
    num_classes: int = 4,
    node_data: dict[str, np.ndarray] | None = None,
    edge_data: dict[str, np.ndarray] | None = None,
    with_edge_weight: bool = False,
    graph_name: str = "testgraph",
    balance_ntypes=None,
    balance_edges: bool = False,
) -> tuple[str, dict[str, np.ndarray]]:
    """Generate a graph and partition it under ``tmp_dir``.

    Args:
        tmp_dir: a scratch folder (e.g. pytest's ``tmp_path``); output goes to ``tmp_dir/graph_name-Kparts``.
        num_nodes, avg_degree, feat_dim, num_classes, seed: the generated graph.
        num_parts: number of partitions.
        method: ``'random'`` or ``'metis'``.
        feat_dtype: ``'float32'``, ``'float16'`` or ``'bfloat16'``: how feature matrices are stored
            (the returned ``graph`` keeps the original float32 values).
        node_data: extra node arrays (first dimension ``num_nodes``).
        edge_data: extra edge arrays (first dimension = number of edges, ``round(num_nodes * avg_degree)``).
        with_edge_weight: add an edge array ``weight`` (float32, uniform in [0.1, 1)).
        graph_name: the graph's name.
        balance_ntypes, balance_edges: passed to :func:`partition_graph`.

    Returns:
        ``(config_path, graph)``: the partition config path, and the original arrays (everything above,
        plus ``num_nodes`` as a 0-d array and the ID maps ``orig_nid`` / ``orig_eid``: new ID -> original ID).
    """
    graph = make_graph(num_nodes, avg_degree, feat_dim, num_classes, seed)
    num_edges = graph["src"].shape[0]
    if with_edge_weight:
        rng = np.random.default_rng([seed, 99])
        graph["weight"] = rng.uniform(0.1, 1.0, num_edges).astype(np.float32)
    for name, arr in (node_data or {}).items():
        if np.asarray(arr).shape[0] != num_nodes:
            raise ValueError(f"node_data[{name!r}] has {np.asarray(arr).shape[0]} rows, expected {num_nodes}")
        graph[name] = np.asarray(arr)
    for name, arr in (edge_data or {}).items():
        if np.asarray(arr).shape[0] != num_edges:
            raise ValueError(f"edge_data[{name!r}] has {np.asarray(arr).shape[0]} rows, expected {num_edges}")
        graph[name] = np.asarray(arr)
    config_path = _partition(
        tmp_dir,
        graph,
        graph_name,
        num_parts,
        method,
        feat_dtype,
        seed,
        balance_ntypes,
        balance_edges,
        num_nodes,
    )
    return config_path, graph


def load_cora() -> dict[str, np.ndarray]:
    """Cora's arrays: ``src``, ``dst``, ``feat``, ``label``, ``train_mask``, ``val_mask``, ``test_mask``."""
    for path in CORA_PATHS:
        if path.is_file():
            with np.load(path) as data:
                return {k: data[k] for k in data.files}
    raise FileNotFoundError(f"cora.npz not found at any of {[str(p) for p in CORA_PATHS]}")


def partition_cora(
    tmp_dir: str | os.PathLike,
    num_parts: int = 2,
    method: str = "metis",
    feat_dtype: str = "float32",
    balance_ntypes=None,
    balance_edges: bool = False,
    seed: int = 0,
) -> tuple[str, dict[str, np.ndarray]]:
    """Partition Cora (2,708 nodes, 10,556 edges, 1,433-d features) under ``tmp_dir``.

    Returns:
        ``(config_path, graph)`` as :func:`make_partitioned_graph`.
    """
    graph = load_cora()
    num_nodes = graph["feat"].shape[0]
    config_path = _partition(
        tmp_dir, graph, "cora", num_parts, method, feat_dtype, seed, balance_ntypes, balance_edges, num_nodes
    )
    return config_path, graph


def _partition(
    tmp_dir, graph, graph_name, num_parts, method, feat_dtype, seed, balance_ntypes, balance_edges, num_nodes
) -> str:
    out = os.path.join(os.fspath(tmp_dir), f"{graph_name}-{num_parts}parts")
    arrays = {k: v for k, v in graph.items() if k not in ("orig_nid", "orig_eid", "num_nodes")}
    arrays["num_nodes"] = np.asarray(num_nodes)
    result = partition_graph(
        arrays,
        graph_name,
        num_parts,
        out,
        part_method=method,
        balance_ntypes=balance_ntypes,
        balance_edges=balance_edges,
        feat_dtype=None if feat_dtype == "float32" else feat_dtype,
        seed=seed,
        overwrite=True,
    )
    graph["num_nodes"] = np.asarray(num_nodes)
    graph["orig_nid"] = result.orig_nid
    graph["orig_eid"] = result.orig_eid
    return result.config_path


def to_original(graph: dict[str, np.ndarray], new_nids=None, new_eids=None):
    """Map new (partitioned) IDs back to original IDs with the maps in ``graph``.

    Returns:
        The original node IDs, the original edge IDs, or both (a tuple) when both are given.
    """
    out = []
    if new_nids is not None:
        out.append(graph["orig_nid"][np.asarray(new_nids, dtype=np.int64)])
    if new_eids is not None:
        out.append(graph["orig_eid"][np.asarray(new_eids, dtype=np.int64)])
    return out[0] if len(out) == 1 else tuple(out)


def relabeled(graph: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The graph in partitioned (new, global) IDs: what the servers serve.

    Returns:
        ``src``, ``dst`` indexed by new edge ID, holding new node IDs; every node array with row ``i`` for
        new node ID ``i``; every edge array with row ``j`` for new edge ID ``j``; ``num_nodes``.
    """
    orig_nid, orig_eid = graph["orig_nid"], graph["orig_eid"]
    num_nodes = int(graph["num_nodes"])
    num_edges = graph["src"].shape[0]
    new_of_orig = np.empty(num_nodes, dtype=np.int64)
    new_of_orig[orig_nid] = np.arange(num_nodes, dtype=np.int64)
    out = {
        "src": new_of_orig[graph["src"][orig_eid]],
        "dst": new_of_orig[graph["dst"][orig_eid]],
        "num_nodes": np.asarray(num_nodes),
    }
    for name, arr in graph.items():
        if name in out or name in ("orig_nid", "orig_eid") or np.ndim(arr) == 0:
            continue
        if arr.shape[0] == num_nodes:
            out[name] = arr[orig_nid]
        elif arr.shape[0] == num_edges:
            out[name] = arr[orig_eid]
    return out
