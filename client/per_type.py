"""The per-type arguments of typed sampling, checked and turned into the homogeneous ID space the
partitions answer in, and the partitions' homogeneous answers turned back into per-type IDs.

DGL's typed calls take ``{ntype: IDs}`` seeds, ``{etype: fanout}`` fanouts, ``{etype: IDs}`` excluded
edges; on a graph with one node and one edge type, a plain tensor and a plain int are the same thing.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from graphstore.ids import as_id_array, check_id_range
from graphstore.sampling_rules import check_fanout
from graphstore.types import CanonicalEtype, GraphSchema, etype_key


def _canonical_keys(schema: GraphSchema, keys, what: str) -> list[CanonicalEtype]:
    """The canonical types of ``keys`` (edge types as a user names them).

    Raises:
        KeyError: unknown or ambiguous edge types (every one of them listed, with the graph's types).
    """
    resolved, unknown = [], []
    for key in keys:
        try:
            resolved.append(schema.to_canonical_etype(key))
        except KeyError:
            unknown.append(key)
    if unknown:
        known = [etype_key(c) for c in schema.canonical_etypes]
        raise KeyError(f"{what}: unknown or ambiguous edge types {unknown}; the graph has {known}")
    return resolved


def homo_node_ids(book, nodes, what: str = "nodes") -> np.ndarray:
    """Homogeneous node IDs of seeds: ``{ntype: per-type IDs}``, or IDs on a graph with one node type.

    Args:
        book: the partition book.
        nodes: the seeds.
        what: the argument's name, for error messages.

    Returns:
        int64 homogeneous IDs, type by type in the order given.

    Raises:
        KeyError: an unknown node type.
        ValueError: plain IDs on a graph with several node types.
        IndexError: an ID outside its type.
    """
    schema = book.schema
    if not isinstance(nodes, Mapping):
        if len(schema.ntypes) != 1:
            raise ValueError(
                f"{what} must be {{ntype: IDs}} on a graph with node types {list(schema.ntypes)}, "
                f"got {type(nodes).__name__}"
            )
        nodes = {schema.ntypes[0]: nodes}
    pieces = []
    for ntype, ids in nodes.items():
        name = schema.ntypes[schema.ntype_id(ntype)]
        array = as_id_array(ids, what)
        if len(schema.ntypes) == 1:
            check_id_range(array, book.num_nodes(), what)
            pieces.append(array)
        else:
            check_id_range(array, book.num_nodes(name), f"{what}[{name!r}]")
            pieces.append(book.map_to_homo_nid(array, name))
    return np.concatenate(pieces) if len(pieces) != 1 else pieces[0]


def homo_edge_ids(book, edges, what: str = "exclude_edges") -> np.ndarray:
    """Homogeneous edge IDs of ``{etype: per-type IDs}``, or of IDs on a graph with one edge type.

    Raises:
        KeyError: an unknown or ambiguous edge type.
        ValueError: plain IDs on a graph with several edge types.
        IndexError: an ID outside its type.
    """
    schema = book.schema
    if not isinstance(edges, Mapping):
        if len(schema.canonical_etypes) != 1:
            raise ValueError(f"{what} must be {{etype: IDs}} on a graph with several edge types")
        array = as_id_array(edges, what)
        check_id_range(array, book.num_edges(), what)
        return array
    canonicals = _canonical_keys(schema, edges.keys(), what)
    pieces = [
        book.map_to_homo_eid(as_id_array(ids, what), c)
        if len(schema.canonical_etypes) > 1
        else as_id_array(ids, what)
        for c, ids in zip(canonicals, edges.values(), strict=True)
    ]
    for piece in pieces:
        check_id_range(piece, book.num_edges(), what)
    return np.concatenate(pieces) if pieces else np.empty(0, dtype=np.int64)


def etype_fanouts(schema: GraphSchema, fanout) -> list[int]:
    """One fanout per canonical edge type, in type-ID order.

    Args:
        schema: the graph's types.
        fanout: an int for every type, or ``{etype: int}`` naming every type once (0 skips a type, -1
            takes all).

    Raises:
        KeyError: the dict names an unknown or ambiguous edge type (all of them listed).
        ValueError: the dict leaves types out (listed), or a fanout below -1 / not an integer.
    """
    if isinstance(fanout, Mapping):
        canonicals = _canonical_keys(schema, fanout.keys(), "fanout")
        given = dict(zip(canonicals, fanout.values(), strict=True))
        missing = [etype_key(c) for c in schema.canonical_etypes if c not in given]
        if missing:
            raise ValueError(
                f"fanout: no fanout for edge types {missing}; give one for every edge type (0 skips a type)"
            )
        values = [given[c] for c in schema.canonical_etypes]
    else:
        values = [fanout] * len(schema.canonical_etypes)
    return [check_fanout(value) for value in values]


def etype_probs(g, prob, fanouts: list[int]) -> str | list[str | None] | None:
    """The weight tensor the partitions sample each edge type by.

    Args:
        g: the DistGraph (its edge data views give each type's weight tensor).
        prob: None (uniform), an edge feature name every sampled type must have, or ``{etype: name}``
            (a type left out, or None, samples uniformly).
        fanouts: per canonical type (a type with fanout 0 needs no weights).

    Returns:
        On a graph with one edge type the name as given; else one server tensor name (or None) per type.

    Raises:
        KeyError: ``prob`` is missing on sampled edge types (listed), or a dict names an unknown type.
    """
    schema = g.get_partition_book().schema
    if prob is None or (len(schema.canonical_etypes) == 1 and isinstance(prob, str)):
        return prob
    if isinstance(prob, Mapping):
        canonicals = _canonical_keys(schema, prob.keys(), "prob")
        names = dict(zip(canonicals, prob.values(), strict=True))
    else:
        names = {c: prob for c in schema.canonical_etypes}
    if len(schema.canonical_etypes) == 1:
        return names.get(schema.canonical_etypes[0])
    out: list[str | None] = []
    missing = []
    for canonical, fanout in zip(schema.canonical_etypes, fanouts, strict=True):
        name = names.get(canonical)
        if name is None or fanout == 0:
            out.append(None)
            continue
        try:
            out.append(g.edges[canonical].data[name].name)
        except KeyError:
            missing.append(etype_key(canonical))
    if missing:
        raise KeyError(
            f"prob {prob!r}: edge types {missing} have no such edge data; every sampled edge type needs "
            "its weights (give {etype: name} with None, or fanout 0, for the others)"
        )
    return out
