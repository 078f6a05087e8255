"""A small typed (heterogeneous) test graph in the typed input convention, and its partitioning."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from graphstore.partition import partition_graph

NUM_NODES = {"paper": 120, "author": 80, "institution": 5, "topic": 2}
CANONICAL_ETYPES = [
    ("author", "writes", "paper"),
    ("paper", "cites", "paper"),
    ("author", "affiliated_with", "institution"),
    ("paper", "has_topic", "topic"),
    ("paper", "rev_writes", "author"),
]
NUM_EDGES = {"writes": 400, "cites": 300, "affiliated_with": 80, "has_topic": 120}


def typed_arrays(seed: int = 0) -> dict[str, np.ndarray]:
    """A seeded MAG-like graph: papers with features, labels and masks; a weighted ``cites``; an edge
    type (``rev_writes``) that is exactly the reverse of ``writes``; a type with fewer nodes than
    partitions (``topic``)."""
    rng = np.random.default_rng(seed)
    arrays: dict[str, np.ndarray] = {f"num_nodes/{t}": np.int64(n) for t, n in NUM_NODES.items()}
    arrays["node/paper/feat"] = rng.standard_normal((NUM_NODES["paper"], 6)).astype(np.float32)
    arrays["node/paper/label"] = rng.integers(0, 4, NUM_NODES["paper"])
    arrays["node/paper/train_mask"] = rng.random(NUM_NODES["paper"]) < 0.4
    arrays["node/author/age"] = rng.integers(20, 80, NUM_NODES["author"])
    for src_type, etype, dst_type in CANONICAL_ETYPES[:4]:
        count = NUM_EDGES[etype]
        key = f"edge/{src_type}:{etype}:{dst_type}"
        arrays[f"{key}/src"] = rng.integers(0, NUM_NODES[src_type], count)
        arrays[f"{key}/dst"] = rng.integers(0, NUM_NODES[dst_type], count)
    arrays["edge/paper:cites:paper/weight"] = rng.random(NUM_EDGES["cites"]).astype(np.float32)
    arrays["edge/paper:rev_writes:author/src"] = arrays["edge/author:writes:paper/dst"]
    arrays["edge/paper:rev_writes:author/dst"] = arrays["edge/author:writes:paper/src"]
    return arrays


def make_typed_partitions(tmp_path: Path, num_parts: int = 3, method: str = "metis", seed: int = 0, **kwargs):
    """Partition :func:`typed_arrays` into ``tmp_path/parts``; returns ``(result, arrays)``."""
    arrays = typed_arrays(seed)
    result = partition_graph(
        arrays,
        "typed",
        num_parts,
        str(tmp_path / f"parts-{method}-{num_parts}"),
        part_method=method,
        **kwargs,
    )
    return result, arrays


def relabeled_typed(result, arrays: dict[str, np.ndarray]) -> dict:
    """The typed graph in partitioned per-type IDs: what the servers serve.

    Returns:
        ``{"edges": {canonical etype: (src, dst)}, "nodes": {ntype: {name: rows}}}``: ``src`` / ``dst``
        indexed by new per-type edge ID, holding new per-type node IDs; node arrays with row ``i`` for
        new per-type node ID ``i``.
    """
    new_of_orig = {}
    for ntype, orig in result.orig_nids_per_type.items():
        inverse = np.empty(orig.size, dtype=np.int64)
        inverse[orig] = np.arange(orig.size)
        new_of_orig[ntype] = inverse
    edges = {}
    for canonical in CANONICAL_ETYPES:
        key = ":".join(canonical)
        orig_e = result.orig_eids_per_type[key]
        src = new_of_orig[canonical[0]][arrays[f"edge/{key}/src"][orig_e]]
        dst = new_of_orig[canonical[2]][arrays[f"edge/{key}/dst"][orig_e]]
        edges[canonical] = (src, dst)
    nodes = {ntype: {} for ntype in NUM_NODES}
    for key, values in arrays.items():
        parts = key.split("/")
        if parts[0] == "node":
            nodes[parts[1]][parts[2]] = values[result.orig_nids_per_type[parts[1]]]
    return {"edges": edges, "nodes": nodes}
