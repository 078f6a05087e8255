"""``dgl.distributed``'s partitioning and loading functions, with DGL's arguments and return shapes.

- :func:`partition_graph` takes an in-memory graph (a DGL graph or a PyG ``Data`` / ``HeteroData``, read
  by their interface; see :mod:`graphstore.partition.object_input`) or anything the native
  :func:`graphstore.partition.partition_graph` takes, with DGL's keyword arguments.
- :func:`load_partition` returns DGL's 7-tuple, :func:`load_partition_book` DGL's 4-tuple (also of a
  partitioning DGL wrote), :func:`load_partition_feats` the two feature dicts. Feature keys are
  ``"ntype/name"`` and ``"src:etype:dst/name"``; the "graph" of the tuple is the partition as DGL's
  local graph (:func:`~graphstore.compat.dgl.distributed.partition_view.partition_graph_of`).
- ``RESERVED_FIELD_DTYPE``, ``_get_inner_node_mask`` and ``_get_inner_edge_mask``: DGL's names for the
  reserved fields of a partition's graph, which DGL's partition tests import.
- GraphBolt: ``partition_graph(use_graphbolt=True)`` and :func:`dgl_partition_to_graphbolt` record DGL's
  options; ``load_partition(..., use_graphbolt=True)`` gives GraphBolt's graph of a partition (see
  :mod:`~graphstore.compat.dgl.distributed.graphbolt_partition`).
"""

from __future__ import annotations

import logging
import os

import torch

from graphstore import dtypes
from graphstore.compat.dgl.distributed.graphbolt_partition import (
    graphbolt_graph_of,
    read_record,
    record_graphbolt,
    write_record,
)
from graphstore.compat.dgl.distributed.partition_book import RangePartitionBook
from graphstore.compat.dgl.distributed.partition_view import (
    RESERVED_FIELD_DTYPE,
    TYPE_KEY,
    partition_graph_of,
)
from graphstore.partition import PartitionData, read_config
from graphstore.partition import load_partition as _native_load_partition
from graphstore.partition import load_partition_book as _native_load_book
from graphstore.partition import partition_graph as _native_partition_graph
from graphstore.partition.format import schema_of
from graphstore.partition.trainer_ids import add_trainer_ids

logger = logging.getLogger(__name__)

# METIS objective DGL names 'cut' (edge cut); graphstore's METIS minimizes the edge cut.
_OBJTYPES = ("cut",)
_GRAPH_FORMATS = ("coo", "csr", "csc")
# DGL 2.4's partition_graph options of its GraphBolt conversion; DGL ignores them without GraphBolt.
GRAPHBOLT_OPTIONS = ("store_eids", "store_inner_node", "store_inner_edge", "n_jobs")
# graphstore's own options of partition_graph (strict_options: this layer's, not the native function's).
NATIVE_OPTIONS = ("feat_dtype", "seed", "overwrite")
STRICT_OPTION = "strict_options"


def load_partition_book(part_config: str, part_id: int):
    """The partition book of a partitioned graph, as DGL returns it.

    Args:
        part_config: the ``NAME.json`` of the partitioned graph.
        part_id: the partition the book is used from.

    Returns:
        ``(gpb, graph_name, ntypes, etypes)``: the :class:`RangePartitionBook`, the graph's name,
        ``{ntype: type ID}`` and ``{(src, etype, dst): type ID}``.

    Raises:
        FileNotFoundError: a missing config. ValueError: ``part_id`` out of range.
        graphstore.errors.ConfigError: an invalid config.
    """
    book = RangePartitionBook.of(_native_load_book(part_config, part_id))
    ntypes = {ntype: type_id for type_id, ntype in enumerate(book.ntypes)}
    etypes = {canonical: type_id for type_id, canonical in enumerate(book.canonical_etypes)}
    return book, book.graph_name, ntypes, etypes


def _features(data: PartitionData, nodes: bool) -> dict[str, torch.Tensor]:
    feats, schemes = (data.node_feats, data.node_schemes) if nodes else (data.edge_feats, data.edge_schemes)
    return {
        f"{type_key}/{name}": dtypes.to_torch(array, schemes[type_key][name].dtype)
        for type_key, arrays in feats.items()
        for name, array in arrays.items()
    }


def load_partition_feats(part_config: str, part_id: int, load_nodes: bool = True, load_edges: bool = True):
    """The node and edge features of one partition (copied into tensors), in local order.

    Returns:
        ``(node_feats, edge_feats)``: ``{"ntype/name": tensor}`` and ``{"src:etype:dst/name": tensor}``;
        None for a side not loaded.

    Raises:
        FileNotFoundError, ValueError, graphstore.errors.ConfigError: as :func:`load_partition`.
    """
    data = _native_load_partition(part_config, part_id)
    return (
        _features(data, nodes=True) if load_nodes else None,
        _features(data, nodes=False) if load_edges else None,
    )


def load_partition(part_config: str, part_id: int, load_feats: bool = True, use_graphbolt: bool = False):
    """One partition, as DGL returns it.

    Args:
        part_config: the ``NAME.json`` of the partitioned graph.
        part_id: which partition.
        load_feats: also return the partition's features (else two empty dicts).
        use_graphbolt: give the graph as GraphBolt's
            :class:`~graphstore.compat.dgl.graphbolt.FusedCSCSamplingGraph` (the partitioning must have
            been made or converted for GraphBolt).

    Returns:
        ``(graph, node_feats, edge_feats, gpb, graph_name, ntypes, etypes)``: the partition as DGL's
        local graph (inner nodes, halo nodes, the partition's edges, with ``dgl.NID``, ``dgl.EID``,
        ``inner_node``, ``inner_edge`` and on a typed graph ``dgl.NTYPE`` / ``dgl.ETYPE``), or GraphBolt's
        graph of it; the feature dicts, the partition book (``partid == part_id``), the graph's name, the
        node types and the canonical edge types (lists, in ID order).

    Raises:
        FileNotFoundError: a missing config or partition file.
        ValueError: ``part_id`` out of range; ``use_graphbolt`` on a partitioning not made for GraphBolt.
        graphstore.errors.ConfigError: an invalid config, a file that disagrees with it, or a
            partitioning DGL wrote (convert it with ``graphstore convert --from-dgl``).
    """
    record = read_record(part_config) if os.path.isfile(part_config) else {}
    if use_graphbolt and "graphbolt" not in record:
        raise ValueError(
            f"{part_config!r} was not made for GraphBolt: call dgl_partition_to_graphbolt on it or "
            "partition with use_graphbolt=True"
        )
    data = _native_load_partition(part_config, part_id)
    node_feats = _features(data, nodes=True) if load_feats else {}
    edge_feats = _features(data, nodes=False) if load_feats else {}
    book = RangePartitionBook.of(data.book)
    config = read_config(part_config)
    graph = partition_graph_of(data, int(config.get("halo_hops", 1)))
    if record.get("graph_formats"):
        graph = graph.formats(record["graph_formats"])
    if use_graphbolt:
        graph = graphbolt_graph_of(graph, book, record["graphbolt"], config["num_nodes"], config["num_edges"])
    return graph, node_feats, edge_feats, book, data.graph_name, book.ntypes, book.canonical_etypes


def _get_inner_node_mask(graph, ntype_id):
    """DGL's helper: the inner nodes of a partition's graph that have type ``ntype_id`` (bool tensor)."""
    inner = graph.ndata["inner_node"] == 1
    return inner & (graph.ndata[TYPE_KEY] == ntype_id) if TYPE_KEY in graph.ndata else inner


def _get_inner_edge_mask(graph, etype_id):
    """DGL's helper: the inner edges of a partition's graph that have type ``etype_id`` (bool tensor)."""
    inner = graph.edata["inner_edge"] == 1
    return inner & (graph.edata[TYPE_KEY] == etype_id) if TYPE_KEY in graph.edata else inner


def dgl_partition_to_graphbolt(
    part_config,
    *,
    store_eids=True,
    store_inner_node=False,
    store_inner_edge=False,
    graph_formats=None,
    n_jobs=1,
):
    """Make a partitioning loadable as GraphBolt's graphs (DGL's conversion): records the options that
    ``load_partition(..., use_graphbolt=True)`` builds each partition's graph with; the partition files
    are unchanged (graphstore serves them either way).

    Args:
        part_config: the partitioning's ``NAME.json``.
        store_eids, store_inner_node, store_inner_edge: keep ``dgl.EID``, ``inner_node``,
            ``inner_edge`` as attributes (``DGL_DIST_DEBUG`` set now keeps every field, as DGL).
        graph_formats: ``'coo'`` among them keeps the edge-ID map and destinations ``find_edges`` reads
            (None: as the partitioning's own formats).
        n_jobs: DGL's conversion processes; nothing is converted here.

    Raises:
        FileNotFoundError: a missing config. ValueError: an unknown layout.
    """
    read_config(part_config)
    record_graphbolt(part_config, store_eids, store_inner_node, store_inner_edge, graph_formats)


def partition_graph(
    g,
    graph_name: str,
    num_parts: int,
    out_path: str,
    num_hops: int = 1,
    part_method: str = "metis",
    balance_ntypes=None,
    balance_edges: bool = False,
    return_mapping: bool = False,
    num_trainers_per_machine: int = 1,
    objtype: str = "cut",
    graph_formats=None,
    use_graphbolt: bool = False,
    **kwargs,
):
    """Partition a graph into ``out_path/graph_name.json`` + ``partK/`` (``dgl.distributed.partition_graph``).

    Args:
        g: a DGL graph or a PyG ``Data`` / ``HeteroData`` (by their interface, homogeneous or typed),
            or what :func:`graphstore.partition.partition_graph` takes (arrays, a file path).
        graph_name, num_parts, out_path: as in DGL.
        num_hops: the halo depth of ``load_partition``'s graphs (DGL's meaning); the partition files hold
            the in-edges of each partition's nodes whatever it is, and sampling reads deeper hops from
            the other partitions, so it changes no sampled result.
        part_method: ``'metis'`` or ``'random'``.
        balance_ntypes: node categories to spread evenly: a ``[N]`` tensor or array (e.g. the training
            mask), a node data name, or a list of mask names; on a typed graph, ``{ntype: mask}``
            picks one type's mask.
        balance_edges: also balance the in-edges per partition.
        return_mapping: return the new -> original ID maps.
        num_trainers_per_machine: with N > 1, every node type gets a ``trainer_id`` node array
            (``part_id * N + local trainer``: each partition's nodes cut into N contiguous runs) for
            ``node_split(..., node_trainer_ids=g.ndata['trainer_id'])``, as in DGL.
        objtype: ``'cut'`` (METIS minimizes the edge cut).
        graph_formats: None or a subset of ``'coo'``, ``'csr'``, ``'csc'``: recorded as the layouts of
            ``load_partition``'s graphs (``formats()``); graphstore always stores the in- and out-edge CSR.
        use_graphbolt: also make the partitions loadable as GraphBolt's graphs (see
            :func:`dgl_partition_to_graphbolt`, which takes the GraphBolt options of ``kwargs``).
        kwargs: DGL 2.4's GraphBolt options ``store_eids``, ``store_inner_node``, ``store_inner_edge``,
            ``n_jobs``: used with ``use_graphbolt``, ignored without it (as DGL does); graphstore's own
            ``feat_dtype``, ``seed``, ``overwrite``: None (default, DGL's way) writes into an existing
            folder, replacing ``graph_name.json`` and the ``partK`` folders and keeping the rest; False
            refuses a non-empty folder (graphstore's native default); True replaces the whole folder;
            and ``strict_options``: True (default) raises TypeError for any other keyword argument,
            False logs and ignores it as DGL does.

    Returns:
        None, or with ``return_mapping`` ``(orig_nids, orig_eids)``: int64 tensors (new ID -> original
        ID) on a homogeneous graph, ``{type: tensor}`` of per-type IDs on a typed one.

    Raises:
        NotImplementedError: an option value graphstore does not implement (the message names it).
        TypeError: an unknown keyword argument (DGL ignores one; refused here unless
            ``strict_options=False``).
        ValueError, FileExistsError: as the native function.
    """
    if int(num_trainers_per_machine) < 1:
        raise ValueError(
            f"partition_graph(num_trainers_per_machine={num_trainers_per_machine}): must be >= 1"
        )
    if objtype not in _OBJTYPES:
        raise NotImplementedError(f"partition_graph(objtype={objtype!r}): only 'cut' is supported")
    formats = None
    if graph_formats is not None:
        formats = [graph_formats] if isinstance(graph_formats, str) else list(graph_formats)
        unknown = [f for f in formats if f not in _GRAPH_FORMATS]
        if unknown:
            raise ValueError(f"partition_graph(graph_formats={graph_formats!r}): unknown formats {unknown}")
    strict = bool(kwargs.pop(STRICT_OPTION, True))
    unknown = sorted(set(kwargs) - set(GRAPHBOLT_OPTIONS) - set(NATIVE_OPTIONS))
    if unknown and strict:
        raise TypeError(
            f"partition_graph() got unexpected keyword arguments {unknown} (strict_options=False ignores "
            "them, as DGL does)"
        )
    if unknown:
        logger.warning(
            "partition_graph: ignoring unknown keyword arguments %s (strict_options=False)", unknown
        )
    native = {name: kwargs.pop(name) for name in NATIVE_OPTIONS if name in kwargs}
    overwrite = native.pop("overwrite", None)
    result = _native_partition_graph(
        g,
        graph_name,
        num_parts,
        out_path,
        num_hops=num_hops,
        part_method=part_method,
        balance_ntypes=balance_ntypes,
        balance_edges=balance_edges,
        overwrite=bool(overwrite),
        write_over=overwrite is None,
        **native,
    )
    if int(num_trainers_per_machine) > 1:
        add_trainer_ids(result.config_path, int(num_trainers_per_machine))
    write_record(result.config_path, graph_formats=formats)
    if use_graphbolt:
        options = {"store_eids": True, "store_inner_node": False, "store_inner_edge": False}
        options.update({k: kwargs[k] for k in options if k in kwargs})
        record_graphbolt(result.config_path, graph_formats=formats, **options)
    if not return_mapping:
        return None
    schema = schema_of(read_config(result.config_path))
    if schema.is_homogeneous:
        return torch.from_numpy(result.orig_nid.copy()), torch.from_numpy(result.orig_eid.copy())
    nids = {ntype: torch.from_numpy(ids.copy()) for ntype, ids in result.orig_nids_per_type.items()}
    eids = {
        tuple(key.split(":")): torch.from_numpy(ids.copy()) for key, ids in result.orig_eids_per_type.items()
    }
    return nids, eids


__all__ = [
    "RESERVED_FIELD_DTYPE",
    "dgl_partition_to_graphbolt",
    "load_partition",
    "load_partition_book",
    "load_partition_feats",
    "partition_graph",
]
