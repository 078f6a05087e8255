"""The ID spaces and the data tensors of one loaded partition, as the server registers them.

A partition owns, in every ID space (all nodes, all edges, each node type, each edge type), one
contiguous range; its feature files become named tensors over those spaces (plain names on a
homogeneous graph, ``TYPE/NAME`` on a typed one), and checkpoints key their rows by original IDs.
"""

from __future__ import annotations

import numpy as np

from graphstore.partition.types import PartitionData
from graphstore.server.id_range import IdRange
from graphstore.types import EDGE, NODE, typed_tensor_name


def _edge_feature_name(name: str, node_names: set[str]) -> str:
    """Edge features share the tensor namespace with node features; on a homogeneous graph a clashing
    edge feature is registered as ``edge:NAME``."""
    return f"edge:{name}" if name in node_names else name


def id_ranges(book, part_id: int) -> dict[str, IdRange]:
    """The IDs this partition owns in every ID space: all nodes, all edges, and each type's."""
    schema = book.schema
    policies = [NODE, EDGE]
    if not schema.is_homogeneous:
        policies += [schema.node_policy(t) for t in schema.ntypes]
        policies += [schema.edge_policy(c) for c in schema.canonical_etypes]
    ranges = {}
    for policy in policies:
        bounds = book.policy_bounds(policy)
        ranges[policy] = IdRange(int(bounds[part_id]), int(bounds[part_id + 1]), int(bounds[-1]))
    return ranges


def partition_tensors(partition: PartitionData):
    """``(policy, tensor name, array, scheme)`` of every feature in the partition files: plain names
    on a homogeneous graph, ``TYPE/NAME`` (DGL's ``"paper/feat"``) on a typed one."""
    schema = partition.schema
    if schema.is_homogeneous:
        node_feats = next(iter(partition.node_feats.values()), {})
        node_schemes = next(iter(partition.node_schemes.values()), {})
        for name, array in node_feats.items():
            yield NODE, name, array, node_schemes[name]
        for type_key, feats in partition.edge_feats.items():
            for name, array in feats.items():
                yield (
                    EDGE,
                    _edge_feature_name(name, set(node_feats)),
                    array,
                    partition.edge_schemes[type_key][name],
                )
        return
    for ntype, feats in partition.node_feats.items():
        for name, array in feats.items():
            yield (
                schema.node_policy(ntype),
                typed_tensor_name(ntype, name),
                array,
                partition.node_schemes[ntype][name],
            )
    for type_key, feats in partition.edge_feats.items():
        for name, array in feats.items():
            policy = schema.edge_policy(type_key)
            yield policy, typed_tensor_name(type_key, name), array, partition.edge_schemes[type_key][name]


def original_ids(partition: PartitionData) -> dict[str, np.ndarray]:
    """Original IDs of the local rows of every ID space, in local order (what checkpoints key rows by).

    Per-type spaces use the original per-type IDs. The homogeneous spaces of a typed graph use the
    original per-type ID plus the type's offset in type-ID order (the input's homogeneous ID), which
    does not depend on how the graph was partitioned.
    """
    schema, book = partition.schema, partition.book
    orig_nid, orig_eid = np.asarray(partition.orig_nid), np.asarray(partition.orig_eid)
    if schema.is_homogeneous:
        return {NODE: orig_nid, EDGE: orig_eid}
    out: dict[str, np.ndarray] = {}
    node_totals = np.array([book.num_nodes(t) for t in schema.ntypes], dtype=np.int64)
    edge_totals = np.array([book.num_edges(c) for c in schema.canonical_etypes], dtype=np.int64)
    node_shift = np.concatenate(([0], np.cumsum(node_totals)[:-1]))
    edge_shift = np.concatenate(([0], np.cumsum(edge_totals)[:-1]))
    node_counts = np.diff(partition.ntype_offsets)
    edge_counts = np.diff(partition.etype_offsets)
    out[NODE] = orig_nid + np.repeat(node_shift, node_counts)
    out[EDGE] = orig_eid + np.repeat(edge_shift, edge_counts)
    for t, ntype in enumerate(schema.ntypes):
        out[schema.node_policy(ntype)] = orig_nid[partition.ntype_offsets[t] : partition.ntype_offsets[t + 1]]
    for e, canonical in enumerate(schema.canonical_etypes):
        out[schema.edge_policy(canonical)] = orig_eid[
            partition.etype_offsets[e] : partition.etype_offsets[e + 1]
        ]
    return out
