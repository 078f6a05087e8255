"""DGL's GraphBolt partitions on graphstore's partition files: ``partition_graph(use_graphbolt=True)`` and
``dgl_partition_to_graphbolt`` record DGL's options in ``NAME.json``; ``load_partition(...,
use_graphbolt=True)`` then gives each partition as a
:class:`~graphstore.compat.dgl.graphbolt.FusedCSCSamplingGraph` built from the partition's local graph
(:func:`~graphstore.compat.dgl.distributed.partition_view.partition_graph_of`), with the attributes DGL
would have stored. Nothing else is written: graphstore serves the same partition files either way.

What DGL stores, and so what the graph holds:

- ``csc_indptr`` / ``indices``: the local graph's in-edges by destination (edge ID order within one),
  in the narrowest of int32 / int64 that holds the counts, as DGL casts them;
- node attributes: ``dgl.NID`` always, ``inner_node`` with ``store_inner_node``; edge attributes:
  ``dgl.EID`` with ``store_eids``, ``inner_edge`` with ``store_inner_edge``; with ``DGL_DIST_DEBUG`` set
  when converting, every node and edge field of the local graph (type IDs included);
- on a typed graph ``type_per_edge`` and the type-to-ID maps;
- where the ``coo`` layout is kept (``graph_formats`` given with ``'coo'``, or not given and the
  partitions keep it), ``DGL2GB_EID`` (the CSC position of each local edge ID) and ``GB_DST_ID`` (each
  CSC position's destination), which :func:`find_edges_in_partition` needs.
"""

from __future__ import annotations

import json
import os

import torch

from graphstore.client.constants import EID, NID
from graphstore.compat.dgl.graphbolt import FusedCSCSamplingGraph, expand_indptr
from graphstore.compat.dgl.local_graph import LocalGraph
from graphstore.types import etype_key

# Edge attribute names of the coo layout (dgl.distributed.DGL2GB_EID / GB_DST_ID).
DGL2GB_EID = "_dgl2gb_eid"
GB_DST_ID = "_gb_dst_id"
TYPE_KEY = "_TYPE"
# The compat namespace's record in NAME.json: {"graph_formats": [...] or None, "graphbolt": {...}}.
CONFIG_KEY = "dgl"
# The dtypes DGL casts each attribute to (the first that holds its largest value), by field.
_CAST = {
    NID: (torch.int64,),
    TYPE_KEY: (torch.int8, torch.int16, torch.int32, torch.int64),
    "part_id": (torch.int8, torch.int16, torch.int32, torch.int64),
    "inner_node": (torch.uint8,),
    "inner_edge": (torch.uint8,),
}
_DEFAULT_CAST = (torch.int32, torch.int64)


def _narrowest(values: torch.Tensor | None, bound: int, field: str | None = None):
    """``values`` in the first allowed dtype of ``field`` whose maximum exceeds ``bound`` (DGL's cast);
    unchanged when its dtype is not one of them."""
    if values is None:
        return None
    allowed = _CAST.get(field, _DEFAULT_CAST)
    if values.dtype not in allowed:
        return values
    for dtype in allowed:
        if bound < torch.iinfo(dtype).max:
            return values.to(dtype)
    return values


def read_record(part_config: str) -> dict:
    """The compat namespace's record in a partition config (empty when it has none)."""
    with open(part_config) as fh:
        return dict(json.load(fh).get(CONFIG_KEY, {}))


def write_record(part_config: str, **fields) -> None:
    """Add ``fields`` to the compat namespace's record in ``part_config``."""
    with open(part_config) as fh:
        config = json.load(fh)
    config.setdefault(CONFIG_KEY, {}).update(fields)
    tmp = f"{part_config}.tmp"
    with open(tmp, "w") as fh:
        json.dump(config, fh, indent=1)
    os.replace(tmp, part_config)


def record_graphbolt(
    part_config: str, store_eids: bool, store_inner_node: bool, store_inner_edge: bool, graph_formats
) -> None:
    """Record DGL's GraphBolt conversion options (and ``DGL_DIST_DEBUG``) for :func:`graphbolt_graph_of`.

    Raises:
        ValueError: an unknown layout in ``graph_formats``.
    """
    formats = [graph_formats] if isinstance(graph_formats, str) else graph_formats
    if formats is not None and any(f not in ("coo", "csr", "csc") for f in formats):
        raise ValueError(f"graph_formats={graph_formats!r}: layouts are 'coo', 'csr', 'csc'")
    kept = read_record(part_config).get("graph_formats")
    keep_coo = "coo" in formats if formats is not None else (kept is None or "coo" in kept)
    write_record(
        part_config,
        graphbolt={
            "store_eids": bool(store_eids),
            "store_inner_node": bool(store_inner_node),
            "store_inner_edge": bool(store_inner_edge),
            "debug": "DGL_DIST_DEBUG" in os.environ,
            "coo": bool(keep_coo),
        },
    )


def graphbolt_graph_of(local: LocalGraph, book, options: dict, num_nodes: int, num_edges: int):
    """One partition as GraphBolt's graph (see the module docstring).

    Args:
        local: the partition's local graph (:func:`partition_graph_of`).
        book: the graph's partition book.
        options: the recorded ``graphbolt`` options.
        num_nodes, num_edges: the whole graph's counts (the bounds of the ID casts).

    Returns:
        A :class:`FusedCSCSamplingGraph`.
    """
    indptr, indices, edge_ids = local.adj().csc()
    typed = not book.schema.is_homogeneous
    node_names = [NID] + (["inner_node"] if options["store_inner_node"] else [])
    edge_names = ([EID] if options["store_eids"] else []) + (
        ["inner_edge"] if options["store_inner_edge"] else []
    )
    if options["debug"]:
        node_names, edge_names = list(local.ndata), list(local.edata)
    bounds = {NID: num_nodes, "part_id": book.num_partitions(), EID: num_edges}
    node_attributes = {
        name: _narrowest(local.ndata[name], bounds.get(name, len(book.ntypes)), name) for name in node_names
    }
    edge_attributes = {
        name: _narrowest(local.edata[name][edge_ids], bounds.get(name, len(book.canonical_etypes)), name)
        for name in edge_names
    }
    if options["coo"]:
        edge_attributes[DGL2GB_EID] = _narrowest(torch.argsort(edge_ids.long()), num_edges)
        edge_attributes[GB_DST_ID] = _narrowest(expand_indptr(indptr, dtype=torch.int64), num_nodes)
    type_per_edge = None
    if typed:
        type_ids, _ = book.map_to_per_etype(local.edata[EID][edge_ids].numpy())
        type_per_edge = _narrowest(torch.as_tensor(type_ids), len(book.canonical_etypes), TYPE_KEY)
    return FusedCSCSamplingGraph(
        _narrowest(indptr.long(), local.num_edges()),
        _narrowest(indices.long(), local.num_nodes()),
        node_type_offset=None,
        type_per_edge=type_per_edge,
        node_type_to_id={t: i for i, t in enumerate(book.ntypes)} if typed else None,
        edge_type_to_id={etype_key(c): i for i, c in enumerate(book.canonical_etypes)} if typed else None,
        node_attributes=node_attributes,
        edge_attributes=edge_attributes,
    )


def find_edges_in_partition(local_g, partition_book, seed_edges):
    """Global ``(src, dst)`` of edges owned by the book's partition, read from its local graph (DGL's
    ``graph_services._find_edges``): a :class:`FusedCSCSamplingGraph` through its coo attributes, a
    local graph through ``find_edges``.

    Raises:
        ValueError: a GraphBolt graph without the coo attributes (DGL's message).
    """
    local_eids = partition_book.eid2localeid(seed_edges, partition_book.partid)
    if isinstance(local_g, FusedCSCSamplingGraph):
        attributes = local_g.edge_attributes
        if DGL2GB_EID not in attributes or GB_DST_ID not in attributes:
            raise ValueError(
                "The edge attributes DGL2GB_EID and GB_DST_ID are not found. Please make sure `coo` format "
                "is available when generating partitions in GraphBolt format."
            )
        positions = attributes[DGL2GB_EID][local_eids.long()].long()
        local_src, local_dst = local_g.indices[positions].long(), attributes[GB_DST_ID][positions].long()
        nids = local_g.node_attributes[NID]
    else:
        local_src, local_dst = local_g.find_edges(local_eids)
        nids = local_g.ndata[NID]
    return nids[local_src.long()], nids[local_dst.long()]


__all__ = [
    "DGL2GB_EID",
    "GB_DST_ID",
    "find_edges_in_partition",
    "graphbolt_graph_of",
    "read_record",
    "record_graphbolt",
    "write_record",
]
