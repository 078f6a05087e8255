"""``dgl.data.utils.save_graphs`` / ``load_graphs`` (also ``dgl.save_graphs`` / ``dgl.load_graphs``) for
the in-memory graphs of :mod:`graphstore.compat.dgl`.

The file is graphstore's own (a ``torch.save`` of plain tensors, lists and strings, read back with
``weights_only=True``): DGL's binary ``.dgl`` format is DGL's. :func:`load_graphs` recognises a DGL file
by its magic number and says how to read it (with DGL; ``graphstore convert --from-dgl`` turns a DGL
partitioning into graphstore's format).

A graphstore partitioning has no ``partK/graph.dgl``; ``load_graphs("OUT/partK/graph.dgl")`` on one
returns partition K's local graph, what DGL's file would hold (as ``load_partition`` gives it).
"""

from __future__ import annotations

import json
import os

import torch

from graphstore.compat.dgl.local_graph import LocalGraph

FORMAT = "graphstore.compat.dgl graphs"
VERSION = 1
# The first 8 bytes (little-endian uint64) of a file DGL's save_graphs wrote.
DGL_GRAPH_MAGIC = 0xDD2E4FF046B4A13F


def _graph_record(g: LocalGraph) -> dict:
    return {
        "ntypes": list(g.ntypes),
        "num_nodes": [g.num_nodes(t) for t in g.ntypes],
        "canonical_etypes": [list(c) for c in g.canonical_etypes],
        "edges": [list(g.edges(etype=c)) for c in g.canonical_etypes],
        "idtype": str(g.idtype).removeprefix("torch."),
        "node_data": [dict(g.nodes[t].data) for t in g.ntypes],
        "edge_data": [dict(g.edges[c].data) for c in g.canonical_etypes],
    }


def _graph_of(record: dict) -> LocalGraph:
    canonical = [tuple(c) for c in record["canonical_etypes"]]
    g = LocalGraph(
        {c: tuple(edges) for c, edges in zip(canonical, record["edges"], strict=True)},
        dict(zip(record["ntypes"], record["num_nodes"], strict=True)),
        getattr(torch, record["idtype"]),
    )
    for ntype, frame in zip(record["ntypes"], record["node_data"], strict=True):
        g.nodes[ntype].data.update(frame)
    for c, frame in zip(canonical, record["edge_data"], strict=True):
        g.edges[c].data.update(frame)
    return g


def save_graphs(filename, g_list, labels=None, formats=None) -> None:
    """Save graphs (and a dict of label tensors) to ``filename``.

    Args:
        filename: the file to write.
        g_list: a graph or a list of graphs built by :mod:`graphstore.compat.dgl`.
        labels: ``{name: tensor}`` saved beside the graphs.
        formats: DGL's choice of stored sparse layouts; accepted (the edges are stored as pairs).

    Raises:
        TypeError: a graph that is not a :class:`LocalGraph`.
    """
    graphs = [g_list] if isinstance(g_list, LocalGraph) else list(g_list)
    for g in graphs:
        if not isinstance(g, LocalGraph):
            raise TypeError(
                f"save_graphs saves graphs built by graphstore.compat.dgl, got {type(g).__name__}"
            )
    payload = {
        "format": FORMAT,
        "version": VERSION,
        "graphs": [_graph_record(g) for g in graphs],
        "labels": dict(labels or {}),
    }
    torch.save(payload, os.fspath(filename))


def _is_dgl_file(path: str) -> bool:
    with open(path, "rb") as fh:
        head = fh.read(8)
    return len(head) == 8 and int.from_bytes(head, "little") == DGL_GRAPH_MAGIC


def _partition_graph_at(path: str):
    """The local graph of the graphstore partition whose folder holds ``path`` (DGL's
    ``partK/graph.dgl``), or None when ``path`` is not such a place."""
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.basename(path) != "graph.dgl" or not os.path.isfile(os.path.join(folder, "in_indptr.npy")):
        return None
    from graphstore.compat.dgl.distributed.partition import load_partition

    base = os.path.dirname(folder)
    for name in sorted(os.listdir(base)):
        if not name.endswith(".json"):
            continue
        config = os.path.join(base, name)
        try:
            with open(config) as fh:
                parts = json.load(fh).get("parts", [])
        except (OSError, ValueError, AttributeError):
            continue
        for part_id, part in enumerate(parts):
            if isinstance(part, dict) and os.path.abspath(os.path.join(base, part.get("path", ""))) == folder:
                return load_partition(config, part_id, load_feats=False)[0]
    return None


def load_graphs(filename, idx_list=None):
    """Load the graphs :func:`save_graphs` wrote.

    Args:
        filename: the file.
        idx_list: the positions of the graphs to load (None: all).

    Returns:
        ``(graphs, labels)``: a list of :class:`LocalGraph` and the saved label dict.

    Raises:
        FileNotFoundError: a missing file.
        ValueError: a file DGL wrote (read it with DGL), or one of another format.
        IndexError: a position out of range.
    """
    path = os.fspath(filename)
    if not os.path.isfile(path):
        partition = _partition_graph_at(path)
        if partition is not None:
            return [partition], {}
        raise FileNotFoundError(f"load_graphs: {path!r} not found")
    if _is_dgl_file(path):
        raise ValueError(
            f"{path!r} is in DGL's binary graph format: load it with DGL's dgl.load_graphs (to bring a DGL "
            "partitioning to graphstore, run `graphstore convert --from-dgl NAME.json --out DIR`)"
        )
    try:
        payload = torch.load(path, weights_only=True)
    except Exception as exc:  # noqa: BLE001 - any unreadable file gets the same answer
        raise ValueError(f"load_graphs: {path!r} is not a graph file of save_graphs ({exc})") from None
    if not isinstance(payload, dict) or payload.get("format") != FORMAT:
        raise ValueError(f"load_graphs: {path!r} is not a graph file of save_graphs")
    records = payload["graphs"]
    if idx_list is not None:
        for index in idx_list:
            if not 0 <= int(index) < len(records):
                raise IndexError(f"load_graphs: graph {index} out of range [0, {len(records)})")
        records = [records[int(i)] for i in idx_list]
    return [_graph_of(r) for r in records], payload["labels"]


__all__ = ["load_graphs", "save_graphs"]
