"""The typed (heterogeneous) input convention: arrays named by type, turned into a :class:`GraphData`.

An input ``.npz`` (or a dict of arrays) describes a typed graph with keys

- ``num_nodes/<ntype>``: 0-d int64, one per node type (the node types, in this order);
- ``node/<ntype>/<name>``: node arrays, first dimension = that type's node count;
- ``edge/<src>:<etype>:<dst>/src`` and ``.../dst``: int64 per-type node IDs of the canonical edge type;
- ``edge/<src>:<etype>:<dst>/<name>``: edge arrays, first dimension = that type's edge count.

Node and edge types get their IDs in the order their keys first appear. Any other key is an error,
so a misspelt key never disappears silently.
"""

from __future__ import annotations

import numpy as np

from graphstore.partition.graph import GraphData, validate_graph
from graphstore.types import CanonicalEtype, GraphSchema, etype_key

NUM_NODES_PREFIX = "num_nodes/"
NODE_PREFIX = "node/"
EDGE_PREFIX = "edge/"
TYPED_PREFIXES = (NUM_NODES_PREFIX, NODE_PREFIX, EDGE_PREFIX)


def num_nodes_key(ntype: str) -> str:
    """``num_nodes/<ntype>``."""
    return f"{NUM_NODES_PREFIX}{ntype}"


def node_key(ntype: str, name: str) -> str:
    """``node/<ntype>/<name>``."""
    return f"{NODE_PREFIX}{ntype}/{name}"


def edge_key(canonical_etype: CanonicalEtype, name: str) -> str:
    """``edge/<src>:<etype>:<dst>/<name>`` (``name`` is ``src``, ``dst`` or an edge array's name)."""
    return f"{EDGE_PREFIX}{etype_key(canonical_etype)}/{name}"


def is_typed_input(arrays: dict[str, np.ndarray]) -> bool:
    """Whether a dict of input arrays follows the typed convention (any key with a typed prefix)."""
    return any(key.startswith(TYPED_PREFIXES) for key in arrays)


def graph_from_typed_arrays(arrays: dict[str, np.ndarray]) -> GraphData:
    """Build a validated :class:`GraphData` from arrays in the typed convention.

    Args:
        arrays: the input arrays by key (see the module docstring).

    Returns:
        The graph, edges in edge-type order, per-type IDs turned into homogeneous input IDs.

    Raises:
        ValueError: a malformed key, a type missing from ``num_nodes/``, an edge type without ``src``
            or ``dst``, IDs out of range for their type, or an array with the wrong first dimension;
            the message names the key and the value.
    """
    counts: dict[str, int] = {}
    node_data: dict[str, dict[str, np.ndarray]] = {}
    edges: dict[tuple[str, str, str], dict[str, np.ndarray]] = {}
    for key, value in arrays.items():
        if key.startswith(NUM_NODES_PREFIX):
            ntype = key[len(NUM_NODES_PREFIX) :]
            counts[ntype] = _count(key, value)
        elif key.startswith(NODE_PREFIX):
            ntype, _, name = key[len(NODE_PREFIX) :].partition("/")
            if not ntype or not name or "/" in name:
                raise ValueError(f"malformed key {key!r}: node arrays are named node/<ntype>/<name>")
            node_data.setdefault(ntype, {})[name] = np.asarray(value)
        elif key.startswith(EDGE_PREFIX):
            etype, _, name = key[len(EDGE_PREFIX) :].partition("/")
            canonical = tuple(etype.split(":"))
            if len(canonical) != 3 or not all(canonical) or not name or "/" in name:
                raise ValueError(
                    f"malformed key {key!r}: edge arrays are named edge/<src>:<etype>:<dst>/<name>"
                )
            edges.setdefault(canonical, {})[name] = np.asarray(value)
        else:
            raise ValueError(
                f"unexpected key {key!r} in a typed graph: keys are num_nodes/<ntype>, node/<ntype>/<name> "
                "and edge/<src>:<etype>:<dst>/<name>"
            )
    if not counts:
        raise ValueError("a typed graph needs num_nodes/<ntype> for every node type; none given")
    for ntype in node_data:
        if ntype not in counts:
            raise ValueError(
                f"node arrays of type {ntype!r} but no key num_nodes/{ntype}; known: {sorted(counts)}"
            )
    for canonical in edges:
        for end in (canonical[0], canonical[2]):
            if end not in counts:
                raise ValueError(
                    f"edge type {':'.join(canonical)} names node type {end!r}, which has no num_nodes/{end}"
                )
    schema = GraphSchema(tuple(counts), tuple(edges))
    offsets = np.concatenate(([0], np.cumsum(list(counts.values())))).astype(np.int64)
    src_parts, dst_parts, edges_per_type, edge_data = [], [], [], {}
    for canonical, members in edges.items():
        key = ":".join(canonical)
        for end in ("src", "dst"):
            if end not in members:
                raise ValueError(f"edge type {key} has no edge/{key}/{end}")
        src, dst = (_ids(f"edge/{key}/{end}", members[end]) for end in ("src", "dst"))
        if src.shape[0] != dst.shape[0]:
            raise ValueError(
                f"edge/{key}/src and edge/{key}/dst differ in length: {src.shape[0]} != {dst.shape[0]}"
            )
        for end, ids, ntype in (("src", src, canonical[0]), ("dst", dst, canonical[2])):
            bad = _first_bad(ids, counts[ntype])
            if bad is not None:
                raise ValueError(
                    f"edge/{key}/{end} holds node ID {bad}, out of range for node type {ntype!r} "
                    f"with {counts[ntype]} nodes"
                )
        t_src, t_dst = schema.ntype_id(canonical[0]), schema.ntype_id(canonical[2])
        src_parts.append(src.astype(np.int64) + offsets[t_src])
        dst_parts.append(dst.astype(np.int64) + offsets[t_dst])
        edges_per_type.append(int(src.shape[0]))
        edge_data[key] = {n: a for n, a in members.items() if n not in ("src", "dst")}
    graph = GraphData(
        schema=schema,
        nodes_per_type=tuple(counts.values()),
        src=np.concatenate(src_parts) if src_parts else np.empty(0, np.int64),
        dst=np.concatenate(dst_parts) if dst_parts else np.empty(0, np.int64),
        node_data={t: node_data.get(t, {}) for t in schema.ntypes},
        edge_data=edge_data,
        edges_per_type=tuple(edges_per_type),
    )
    validate_graph(graph)
    return graph


def _count(key: str, value) -> int:
    arr = np.asarray(value)
    if arr.size != 1 or arr.dtype.kind not in "iu" or int(arr.reshape(())) < 0:
        raise ValueError(f"{key} must be a non-negative integer scalar, got {arr.dtype}{list(arr.shape)}")
    return int(arr.reshape(()))


def _ids(key: str, value) -> np.ndarray:
    arr = np.asarray(value)
    if arr.ndim != 1 or (arr.size and arr.dtype.kind not in "iu"):
        raise ValueError(f"{key} must be a 1-d integer array, got {arr.dtype}{list(arr.shape)}")
    return arr


def _first_bad(ids: np.ndarray, count: int) -> int | None:
    if ids.size == 0:
        return None
    lo, hi = int(ids.min()), int(ids.max())
    if lo < 0:
        return lo
    return hi if hi >= count else None
