"""A graph for the partitioner from a dict of arrays shaped like an input ``.npz``: homogeneous (``src``,
``dst``, node and edge arrays told apart by their length; see :mod:`graphstore.partition.graph`) or in
the typed convention of :mod:`graphstore.partition.typed_input`.
"""

from __future__ import annotations

import numpy as np

from graphstore.partition.graph import GraphData, check_id_array, id_range, validate_graph
from graphstore.partition.typed_input import graph_from_typed_arrays, is_typed_input


def graph_from_arrays(arrays: dict[str, np.ndarray], num_nodes: int | None = None) -> GraphData:
    """Build a :class:`GraphData` from a dict shaped like an input ``.npz``: homogeneous (below) or in the
    typed convention of :mod:`graphstore.partition.typed_input`.

    Args:
        arrays: ``src``, ``dst``, optional ``num_nodes``, and node / edge arrays by name.
        num_nodes: overrides ``arrays['num_nodes']`` and the inferred count.

    Returns:
        The validated graph.

    Raises:
        ValueError: missing ``src``/``dst``, or an array whose length is neither N nor E.
    """
    if is_typed_input(arrays):
        if num_nodes is not None:
            raise ValueError("num_nodes does not apply to a typed graph: give num_nodes/<ntype> arrays")
        return graph_from_typed_arrays(arrays)
    missing = [k for k in ("src", "dst") if k not in arrays]
    if missing:
        raise ValueError(f"graph is missing required arrays {missing}; has {sorted(arrays)}")
    src = check_id_array("src", arrays["src"])
    dst = check_id_array("dst", arrays["dst"])
    if src.shape[0] != dst.shape[0]:
        raise ValueError(f"src and dst differ in length: {src.shape[0]} != {dst.shape[0]}")
    num_edges = src.shape[0]
    others = {k: np.asarray(v) for k, v in arrays.items() if k not in ("src", "dst", "num_nodes")}
    for name, arr in others.items():
        if arr.ndim == 0:
            raise ValueError(f"array {name!r} is a scalar; node and edge arrays need one row per node/edge")
    if num_nodes is None and "num_nodes" in arrays:
        num_nodes = int(np.asarray(arrays["num_nodes"]).reshape(()))
    if num_nodes is None:
        lengths = {a.shape[0] for a in others.values() if a.shape[0] != num_edges}
        if len(lengths) > 1:
            raise ValueError(
                f"arrays have mismatched lengths {sorted(lengths)}: each must have num_edges={num_edges} "
                f"rows or the same number of node rows"
            )
        if lengths:
            num_nodes = lengths.pop()
            hi = _largest_id(src, dst)
            if hi >= num_nodes:
                short = sorted(k for k, a in others.items() if a.shape[0] == num_nodes)
                raise ValueError(
                    f"node arrays {short} have {num_nodes} rows, but src/dst hold node ID {hi}: "
                    f"array {short[0]!r} has {num_nodes} rows; expected one per node (>= {hi + 1})"
                )
        else:
            num_nodes = max(_largest_id(src, dst) + 1, 1)
    num_nodes = int(num_nodes)
    node_data: dict[str, np.ndarray] = {}
    edge_data: dict[str, np.ndarray] = {}
    for name, arr in others.items():
        if arr.shape[0] == num_nodes:
            node_data[name] = arr
        elif arr.shape[0] == num_edges:
            edge_data[name] = arr
        else:
            raise ValueError(
                f"array {name!r} has {arr.shape[0]} rows; "
                f"expected num_nodes={num_nodes} or num_edges={num_edges}"
            )
    graph = GraphData.homogeneous(num_nodes, src, dst, node_data, edge_data)
    validate_graph(graph)
    return graph


def _largest_id(src: np.ndarray, dst: np.ndarray) -> int:
    """The largest node ID in ``src`` and ``dst`` (-1 without edges)."""
    return max((bounds[1] for bounds in (id_range(src), id_range(dst)) if bounds is not None), default=-1)
