"""Which partition each node goes to: METIS with balance constraints, or random; and the edge cut.

``balance_ntypes`` names node categories (e.g. training nodes) that every partition should hold an
even share of; METIS gets one vertex-weight column per category (plus in-degrees with
``balance_edges``), and :func:`~graphstore.partition.balance_repair.repair_balance` fixes the
categories METIS leaves uneven.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Mapping

import numpy as np

from graphstore.partition.balance_repair import repair_balance
from graphstore.partition.graph import GraphData
from graphstore.partition.memory import PhaseMeter, stream
from graphstore.partition.metis import DEFAULT_UFACTOR, metis_kway
from graphstore.partition.symmetric_csr import symmetrize

logger = logging.getLogger(__name__)

METHODS = ("metis", "random")
# Allowed imbalance of the categories in balance_ntypes; tighter than METIS's 3% default so that
# small categories (a few dozen training nodes per part) still come out even.
NTYPE_TOLERANCE = 0.02


def balance_categories(graph: GraphData, balance_ntypes) -> np.ndarray | None:
    """Turn ``balance_ntypes`` (and, on a typed graph, the node types) into one category per node.

    Args:
        graph: the graph.
        balance_ntypes: None; an int/bool array of length N (one category per node); the name of a
            node array; or a list of names of boolean masks (a node's category is the first mask
            that holds it, or "none of them"). On a typed graph a name refers to that array in every
            node type that has it (``train_mask`` of papers); nodes of other types are in none; a
            dict ``{ntype: array}`` gives some types' categories (DGL's form; other types: 0).

    Returns:
        int64 [N] categories, or None (a homogeneous graph without ``balance_ntypes``). On a typed
        graph every node type is a category of its own, split further by the masks.

    Raises:
        ValueError: an unknown name, a wrong length, or a non-integer array.
    """
    typed = not graph.schema.is_homogeneous
    if balance_ntypes is None:
        return graph.node_type_of() if typed else None
    if isinstance(balance_ntypes, str):
        balance_ntypes = [balance_ntypes]
    if isinstance(balance_ntypes, Mapping):
        balance_ntypes = _per_type_categories(graph, balance_ntypes)
    if isinstance(balance_ntypes, (list, tuple)) and all(isinstance(x, str) for x in balance_ntypes):
        arrays = [_named_node_array(graph, name) for name in balance_ntypes]
        if len(balance_ntypes) == 1:
            category = _as_categories(arrays[0], balance_ntypes[0], graph.num_nodes)
        else:
            category = np.full(graph.num_nodes, len(balance_ntypes), dtype=np.int64)
            for index in range(len(balance_ntypes) - 1, -1, -1):
                mask = arrays[index]
                if mask.dtype != np.bool_ or mask.ndim != 1:
                    raise ValueError(
                        f"balance_ntypes mask {balance_ntypes[index]!r} must be a boolean [N] array, "
                        f"got {mask.dtype}{list(mask.shape)}"
                    )
                category[mask] = index
    else:
        category = _as_categories(balance_ntypes, "balance_ntypes", graph.num_nodes)
    if typed:
        _, category = np.unique(category, return_inverse=True)
        category = graph.node_type_of() * (int(category.max()) + 1 if category.size else 1) + category
    return category


def _per_type_categories(graph: GraphData, per_type: Mapping) -> np.ndarray:
    """One ``[N]`` array from ``{ntype: [nodes of that type] array}`` (0 for types not given).

    Raises:
        ValueError: an unknown node type or an array of the wrong length.
    """
    out = np.zeros(graph.num_nodes, dtype=np.int64)
    offsets = graph.node_offsets
    for ntype, values in per_type.items():
        if ntype not in graph.schema.ntypes:
            raise ValueError(
                f"balance_ntypes names node type {ntype!r}; the types are {list(graph.schema.ntypes)}"
            )
        t = graph.schema.ntype_id(ntype)
        rows = int(offsets[t + 1] - offsets[t])
        out[offsets[t] : offsets[t + 1]] = _as_categories(values, f"balance_ntypes[{ntype!r}]", rows)
    return out


def _named_node_array(graph: GraphData, name: str) -> np.ndarray:
    """A node array over all N nodes: the homogeneous array, or on a typed graph the concatenation of
    the array of every type that has it (zeros for types that do not).

    Raises:
        ValueError: no node type has an array of that name.
    """
    found = [(t, arrays[name]) for t, arrays in graph.node_data.items() if name in arrays]
    if not found:
        known = sorted({n for arrays in graph.node_data.values() for n in arrays})
        raise ValueError(f"balance_ntypes names node array {name!r}, which the graph lacks (has {known})")
    if graph.schema.is_homogeneous:
        return np.asarray(found[0][1])
    first = np.asarray(found[0][1])
    out = np.zeros(graph.num_nodes, dtype=first.dtype)
    offsets = graph.node_offsets
    for ntype, arr in found:
        t = graph.schema.ntype_id(ntype)
        out[offsets[t] : offsets[t + 1]] = np.asarray(arr).reshape(-1)[: offsets[t + 1] - offsets[t]]
    return out


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
        in_degree = np.zeros(graph.num_nodes, dtype=np.int64)
        for _, dst in stream(1 << 24, graph.dst):
            in_degree += np.bincount(dst, minlength=graph.num_nodes)
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
    meter: PhaseMeter | None = None,
) -> np.ndarray:
    """Partition index of every node.

    Args:
        graph: the graph.
        num_parts: number of partitions, ``1 <= num_parts <= num_nodes``.
        part_method: ``'metis'`` or ``'random'``.
        balance_ntypes: categories to spread evenly (see :func:`balance_categories`); METIS only.
        balance_edges: also balance in-edges per partition; METIS only.
        seed: random seed (METIS's seed too).
        meter: if given, measures the phases ``symmetrize``, ``metis`` and ``balance_repair`` (time and
            peak memory).

    Returns:
        int64 [N] partition per node.

    Raises:
        ValueError: bad ``num_parts`` or ``part_method``.
    """
    check_num_parts(num_parts, graph.num_nodes)
    check_method(part_method)
    if num_parts == 1:
        return np.zeros(graph.num_nodes, dtype=np.int64)
    if part_method == "random":
        categories = None if graph.schema.is_homogeneous else graph.node_type_of()
        return random_assignment(graph.num_nodes, num_parts, seed, categories)
    categories = balance_categories(graph, balance_ntypes)
    weights, imbalance, num_categories = vertex_weights(graph, categories, balance_edges)
    del categories
    phase = meter.phase if meter is not None else (lambda name: contextlib.nullcontext())
    with phase("symmetrize"):
        csr = symmetrize(graph.src, graph.dst, graph.num_nodes)
    with phase("metis"):
        part, _ = metis_kway(
            csr, num_parts, weights, seed=seed, imbalance=imbalance if weights is not None else None
        )
    if num_categories:
        # Only the category columns are required to come out even; in-degree balance stays a METIS goal.
        with phase("balance_repair"):
            part = repair_balance(
                csr, part, weights[:, :num_categories], num_parts, tolerance=NTYPE_TOLERANCE
            )
    del csr
    empty = np.flatnonzero(np.bincount(part, minlength=num_parts) == 0)
    if empty.size:
        logger.warning(
            "METIS left partitions %s empty (num_parts=%d, num_nodes=%d)",
            empty.tolist(),
            num_parts,
            graph.num_nodes,
        )
    return part


def check_num_parts(num_parts, num_nodes: int) -> None:
    """Check that ``num_parts`` is an integer in ``[1, num_nodes]``.

    Raises:
        ValueError: naming ``num_parts`` and its value.
    """
    if isinstance(num_parts, bool) or not isinstance(num_parts, (int, np.integer)):
        raise ValueError(f"num_parts must be an integer, got {num_parts!r}")
    if num_parts < 1:
        raise ValueError(f"num_parts must be >= 1, got {num_parts}")
    if num_parts > num_nodes:
        raise ValueError(f"num_parts={num_parts} exceeds num_nodes={num_nodes}")


def check_method(part_method: str) -> None:
    """Check that ``part_method`` is one of :data:`METHODS`.

    Raises:
        ValueError: naming the method.
    """
    if part_method not in METHODS:
        raise ValueError(f"unknown part_method {part_method!r}; expected one of {list(METHODS)}")


def random_assignment(
    num_nodes: int, num_parts: int, seed: int = 0, categories: np.ndarray | None = None
) -> np.ndarray:
    """Assign nodes to partitions uniformly at random with equal part sizes (±1), per category when
    ``categories`` is given (each node type spread evenly over the partitions).

    Returns:
        int64 [num_nodes] partition index per node.
    """
    rng = np.random.default_rng(seed)
    if categories is None:
        parts = np.arange(num_nodes, dtype=np.int64) % num_parts
        rng.shuffle(parts)
        return parts
    order = rng.permutation(num_nodes)
    order = order[np.argsort(categories[order], kind="stable")]  # grouped by category, random inside
    sizes = np.bincount(categories, minlength=int(categories.max()) + 1 if num_nodes else 0)
    first = np.cumsum(sizes) - sizes
    rank = np.arange(num_nodes, dtype=np.int64) - first[categories[order]]
    offset = rng.integers(0, num_parts, size=sizes.size)  # small categories do not all start at part 0
    parts = np.empty(num_nodes, dtype=np.int64)
    parts[order] = (rank + offset[categories[order]]) % num_parts
    return parts


def edge_cut_fraction(src: np.ndarray, dst: np.ndarray, part: np.ndarray, chunk: int = 1 << 24) -> float:
    """Fraction of directed edges whose endpoints lie in different partitions.

    Args:
        src, dst: edge endpoints.
        part: partition index per node.
        chunk: edges processed per step (bounds temporary memory).
    """
    total = int(src.shape[0])
    if total == 0:
        return 0.0
    cut = 0
    for _, s, d in stream(chunk, src, dst):
        cut += int(np.count_nonzero(part[s] != part[d]))
    return cut / total
