"""Building graphs in memory as DGL partition scripts do: ``dgl.graph``, ``dgl.heterograph``,
``dgl.from_scipy``, ``dgl.rand_graph``, ``dgl.rand_bipartite``, and the transforms they apply before
partitioning (``to_bidirected``, ``add_reverse_edges``, ``add_self_loop``, ``remove_self_loop``).

Each returns a :class:`~graphstore.compat.dgl.local_graph.LocalGraph` (a ``dgl.DGLGraph``) that
``dgl.distributed.partition_graph`` takes. Signatures are DGL 2.4's. Where DGL leaves an order open,
the order here is stated: ``to_bidirected`` gives each type's edges sorted by (source, destination);
``add_reverse_edges`` and ``add_self_loop`` append the new edges after the existing ones, as DGL does.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import torch

from graphstore import function as fn
from graphstore.compat.dgl.local_graph import ID_DTYPES, LocalGraph, SizedFrame
from graphstore.types import DEFAULT_CANONICAL_ETYPE, DEFAULT_NTYPE

_SPARSE_FORMS = ("coo", "csr", "csc")
_FILL_REDUCERS = {"sum": fn.sum, "mean": fn.mean, "max": fn.max, "min": fn.min}


def _check_device(device) -> None:
    if device is not None and torch.device(device).type != "cpu":
        raise NotImplementedError(
            f"device={device}: in-memory graphs are built on the CPU here (move one with g.to(device))"
        )


def _idtype_of(arrays, idtype) -> torch.dtype:
    """The graph's ID dtype: ``idtype``, else that of the first integer tensor given (DGL infers it so),
    else int64."""
    if idtype is not None:
        if idtype not in ID_DTYPES:
            raise ValueError(f"idtype must be torch.int32 or torch.int64, got {idtype}")
        return idtype
    for array in arrays:
        if isinstance(array, torch.Tensor) and array.dtype in ID_DTYPES:
            return array.dtype
    return torch.int64


def _endpoints(data, what: str) -> tuple[object, object]:
    """``(src, dst)`` of graph data: ``(U, V)``, ``('coo', (U, V))``, ``('csr', (indptr, indices,
    eids))`` or ``('csc', (indptr, indices, eids))`` (an empty ``eids`` means ``0..E-1``).

    Raises:
        TypeError: data of another shape.
        ValueError: an unknown sparse format name.
    """
    if isinstance(data, (tuple, list)) and len(data) == 2 and isinstance(data[0], str):
        form, arrays = data
        if form not in _SPARSE_FORMS:
            raise ValueError(f"{what}: sparse format must be one of {list(_SPARSE_FORMS)}, got {form!r}")
        if form == "coo":
            return _endpoints(tuple(arrays), what)
        indptr, indices, eids = (torch.as_tensor(a) for a in arrays)
        rows = torch.repeat_interleave(torch.arange(indptr.numel() - 1), torch.diff(indptr.long()))
        indices = indices.long()
        if eids.numel():
            order = torch.empty_like(rows)
            order[eids.long()] = torch.arange(rows.numel())
            rows, indices = rows[order], indices[order]
        rows = rows.to(indptr.dtype)
        return (rows, indices) if form == "csr" else (indices, rows)
    if isinstance(data, (tuple, list)) and len(data) == 2:
        return data[0], data[1]
    raise TypeError(
        f"{what}: graph data must be (src, dst) or ('coo' | 'csr' | 'csc', arrays), got {type(data).__name__}"
    )


def _max_id(ids) -> int:
    tensor = torch.as_tensor(ids)
    return int(tensor.max()) + 1 if tensor.numel() else 0


def graph(data, *, num_nodes=None, idtype=None, device=None, row_sorted=False, col_sorted=False):
    """A homogeneous graph (``dgl.graph``).

    Args:
        data: ``(src, dst)`` node ID tensors, arrays or lists, or ``('coo', (src, dst))``,
            ``('csr', (indptr, indices, eids))``, ``('csc', (indptr, indices, eids))``; a SciPy sparse
            matrix is read as :func:`from_scipy` reads it.
        num_nodes: the node count (default: the largest ID plus one).
        idtype: ``torch.int32`` or ``torch.int64`` (default: the tensors' integer dtype, else int64).
        device: None or the CPU.
        row_sorted, col_sorted: DGL's hints that the edges are sorted; accepted, not needed.

    Returns:
        A :class:`LocalGraph` with node type ``_N`` and edge type ``('_N', '_E', '_N')``.

    Raises:
        ValueError: IDs outside ``[0, num_nodes)``, unequal lengths, an unknown format.
        TypeError: data of another shape.
        NotImplementedError: a GPU ``device``.
    """
    _check_device(device)
    if hasattr(data, "tocoo"):
        return from_scipy(data, idtype=idtype)
    src, dst = _endpoints(data, "graph")
    if num_nodes is None:
        num_nodes = max(_max_id(src), _max_id(dst))
    return LocalGraph(
        {DEFAULT_CANONICAL_ETYPE: (src, dst)}, {DEFAULT_NTYPE: int(num_nodes)}, _idtype_of((src, dst), idtype)
    )


def heterograph(data_dict, num_nodes_dict=None, idtype=None, device=None):
    """A typed graph (``dgl.heterograph``).

    Args:
        data_dict: ``{(src_type, edge_type, dst_type): graph data}`` (graph data as :func:`graph` takes
            it; a plain edge type name means ``('_N', name, '_N')``).
        num_nodes_dict: ``{node type: count}`` (default: per type, the largest ID plus one).
        idtype, device: as :func:`graph`.

    Returns:
        A :class:`LocalGraph` whose node and edge types are sorted (DGL's type IDs).

    Raises:
        ValueError, TypeError, NotImplementedError: as :func:`graph`.
    """
    _check_device(device)
    if not isinstance(data_dict, Mapping) or not data_dict:
        raise TypeError("heterograph(data_dict): give {(src_type, edge_type, dst_type): (src, dst)}")
    edges = {}
    for key, data in data_dict.items():
        canonical = (DEFAULT_NTYPE, key, DEFAULT_NTYPE) if isinstance(key, str) else tuple(key)
        edges[canonical] = _endpoints(data, f"heterograph: edge type {canonical}")
    counts = dict(num_nodes_dict or {})
    for (src_type, _, dst_type), (src, dst) in edges.items():
        for ntype, ids in ((src_type, src), (dst_type, dst)):
            if num_nodes_dict is None or ntype not in num_nodes_dict:
                counts[ntype] = max(counts.get(ntype, 0), _max_id(ids))
    arrays = [a for pair in edges.values() for a in pair]
    return LocalGraph(edges, counts, _idtype_of(arrays, idtype))


def from_scipy(sp_mat, eweight_name=None, idtype=None, device=None):
    """A homogeneous graph of a square SciPy sparse matrix: an edge from row ``i`` to column ``j`` per
    stored entry, in the matrix's COO order (``dgl.from_scipy``).

    Args:
        sp_mat: a SciPy sparse matrix (any format).
        eweight_name: store the entries as this edge data (None: not stored).
        idtype, device: as :func:`graph`.

    Raises:
        ValueError: a matrix that is not square.
    """
    _check_device(device)
    if sp_mat.shape[0] != sp_mat.shape[1]:
        raise ValueError(f"from_scipy: the matrix must be square for a homogeneous graph, got {sp_mat.shape}")
    coo = sp_mat.tocoo()
    g = LocalGraph(
        {
            DEFAULT_CANONICAL_ETYPE: (
                torch.from_numpy(coo.row.astype(np.int64)),
                torch.from_numpy(coo.col.astype(np.int64)),
            )
        },
        {DEFAULT_NTYPE: int(sp_mat.shape[0])},
        idtype or torch.int64,
    )
    if eweight_name is not None:
        g.edata[eweight_name] = torch.from_numpy(np.asarray(coo.data))
    return g


def _distinct_positions(population: int, count: int) -> torch.Tensor:
    """``count`` distinct integers of ``[0, population)`` in random order, drawn with torch's generator
    (so ``torch.manual_seed`` repeats them)."""
    if count > population:
        raise ValueError(f"cannot draw {count} distinct edges from {population} possible ones")
    if population <= 1 << 24:
        return torch.randperm(population)[:count]
    chosen = torch.empty(0, dtype=torch.int64)
    while chosen.numel() < count:
        draw = torch.randint(population, (2 * (count - chosen.numel()) + 16,))
        merged = torch.cat([chosen, draw])
        unique, inverse = torch.unique(merged, return_inverse=True)
        first = torch.full((unique.numel(),), merged.numel(), dtype=torch.int64)
        first.scatter_reduce_(0, inverse, torch.arange(merged.numel()), reduce="amin")
        chosen = merged[torch.sort(first).values]
    return chosen[:count]


def rand_graph(num_nodes, num_edges, idtype=torch.int64, device=None):
    """A homogeneous graph of ``num_edges`` distinct uniformly random edges (``dgl.rand_graph``)."""
    _check_device(device)
    positions = _distinct_positions(int(num_nodes) * int(num_nodes), int(num_edges))
    return graph((positions // num_nodes, positions % num_nodes), num_nodes=num_nodes, idtype=idtype)


def rand_bipartite(
    utype, etype, vtype, num_src_nodes, num_dst_nodes, num_edges, idtype=torch.int64, device=None
):
    """A graph of one edge type from ``utype`` to ``vtype`` with ``num_edges`` distinct random edges
    (``dgl.rand_bipartite``)."""
    _check_device(device)
    positions = _distinct_positions(int(num_src_nodes) * int(num_dst_nodes), int(num_edges))
    return heterograph(
        {(utype, etype, vtype): (positions // num_dst_nodes, positions % num_dst_nodes)},
        {utype: int(num_src_nodes), vtype: int(num_dst_nodes)},
        idtype=idtype,
    )


def _rebuild(g: LocalGraph, edges: dict, edge_data: dict, copy_ndata: bool) -> LocalGraph:
    """A graph of ``g``'s node types with new edges per type and their edge data; node data shared when
    ``copy_ndata``."""
    out = LocalGraph(edges, {t: g.num_nodes(t) for t in g.ntypes}, g.idtype)
    if copy_ndata:
        for ntype in g.ntypes:
            out._node_frames[ntype].update(g._node_frames[ntype])
    for canonical, frame in edge_data.items():
        for name, value in frame.items():
            out._edge_frames[canonical][name] = value
    return out


def _same_end_types(g: LocalGraph, what: str, ignore_bipartite: bool = False) -> list:
    same = [c for c in g.canonical_etypes if c[0] == c[2]]
    if len(same) != len(g.canonical_etypes) and not ignore_bipartite:
        raise ValueError(
            f"{what} needs edge types whose source and destination types are the same; "
            f"{[c for c in g.canonical_etypes if c[0] != c[2]]} are not"
        )
    return same


def to_bidirected(g, copy_ndata=False, readonly=None):
    """The simple graph with an edge ``v -> u`` for every ``u -> v`` (``dgl.to_bidirected``): per edge
    type, the distinct pairs of the edges and their reverses, sorted by (source, destination). Edge data
    is not kept; node data is shared with ``copy_ndata``.

    Raises:
        ValueError: an edge type whose two ends are different node types.
    """
    _same_end_types(g, "to_bidirected")
    edges = {}
    for canonical in g.canonical_etypes:
        src, dst = g._edges[canonical]
        both_src, both_dst = torch.cat([src, dst]).long(), torch.cat([dst, src]).long()
        width = max(g.num_nodes(canonical[0]), 1)
        keys = torch.unique(both_src * width + both_dst)
        edges[canonical] = (keys // width, keys % width)
    return _rebuild(g, edges, {}, copy_ndata)


def add_reverse_edges(
    g, readonly=None, copy_ndata=True, copy_edata=False, ignore_bipartite=False, exclude_self=True
):
    """The graph with, per edge type, a reversed copy of each edge appended after the edges
    (``dgl.add_reverse_edges``).

    Args:
        g: the graph.
        readonly: deprecated in DGL; ignored.
        copy_ndata: share the node data.
        copy_edata: a reversed edge gets its edge's data (otherwise no edge data is kept).
        ignore_bipartite: leave edge types between different node types as they are (else an error).
        exclude_self: add no reverse of a self-loop.

    Raises:
        ValueError: a bipartite edge type without ``ignore_bipartite``.
    """
    reversible = set(_same_end_types(g, "add_reverse_edges", ignore_bipartite))
    edges, edge_data = {}, {}
    for canonical in g.canonical_etypes:
        src, dst = g._edges[canonical]
        frame = g._edge_frames[canonical]
        if canonical not in reversible:
            edges[canonical] = (src, dst)
            edge_data[canonical] = dict(frame) if copy_edata else {}
            continue
        keep = src != dst if exclude_self else torch.ones_like(src, dtype=torch.bool)
        edges[canonical] = (torch.cat([src, dst[keep]]), torch.cat([dst, src[keep]]))
        edge_data[canonical] = (
            {name: torch.cat([value, value[keep]]) for name, value in frame.items()} if copy_edata else {}
        )
    return _rebuild(g, edges, edge_data, copy_ndata)


def add_self_loop(g, edge_feat_names=None, fill_data=1.0, etype=None):
    """The graph with an edge ``i -> i`` for every node of one edge type's node type, appended after its
    edges (``dgl.add_self_loop``).

    Args:
        g: the graph.
        edge_feat_names: the edge data to fill on the new edges (None: all of it); the new edges of the
            others get zeros.
        fill_data: a number (every new edge gets it), or ``'sum'`` / ``'mean'`` / ``'max'`` / ``'min'``
            of the node's incoming edges' data.
        etype: the edge type (None: the only one).

    Raises:
        ValueError: an edge type between different node types, or an unknown ``fill_data`` name.
    """
    canonical = g.to_canonical_etype(etype)
    if canonical[0] != canonical[2]:
        raise ValueError(f"add_self_loop needs an edge type between one node type, got {canonical}")
    if isinstance(fill_data, str) and fill_data not in _FILL_REDUCERS:
        raise ValueError(
            f"add_self_loop(fill_data={fill_data!r}): use a number or one of {list(_FILL_REDUCERS)}"
        )
    loops = torch.arange(g.num_nodes(canonical[0]), dtype=g.idtype)
    frame = g._edge_frames[canonical]
    names = list(frame) if edge_feat_names is None else list(edge_feat_names)
    new_data = {}
    for name, value in frame.items():
        if name not in names:
            fill = torch.zeros((loops.numel(), *value.shape[1:]), dtype=value.dtype)
        elif isinstance(fill_data, str):
            with g.local_scope():
                g.update_all(fn.copy_e(name, "_m"), _FILL_REDUCERS[fill_data]("_m", "_h"), etype=canonical)
                fill = g._node_frames[canonical[0]]["_h"]
        else:
            fill = torch.full((loops.numel(), *value.shape[1:]), fill_data, dtype=value.dtype)
        new_data[name] = torch.cat([value, fill])
    return _replace_edges(g, canonical, loops, loops, new_data, append=True)


def remove_self_loop(g, etype=None):
    """The graph without the edges ``i -> i`` of one edge type (``dgl.remove_self_loop``); the other
    edges keep their order and data.

    Raises:
        ValueError: an edge type between different node types.
    """
    canonical = g.to_canonical_etype(etype)
    if canonical[0] != canonical[2]:
        raise ValueError(f"remove_self_loop needs an edge type between one node type, got {canonical}")
    src, dst = g._edges[canonical]
    keep = src != dst
    data = {name: value[keep] for name, value in g._edge_frames[canonical].items()}
    return _replace_edges(g, canonical, src[keep], dst[keep], data, append=False)


def _replace_edges(g: LocalGraph, canonical, src, dst, data: dict, append: bool) -> LocalGraph:
    """``g`` with one edge type's edges appended to (or replaced by) ``src``/``dst`` and its edge data
    ``data``; the other types and the node data are kept."""
    edges, edge_data = {}, {}
    for c in g.canonical_etypes:
        old_src, old_dst = g._edges[c]
        if c == canonical:
            edges[c] = (torch.cat([old_src, src]), torch.cat([old_dst, dst])) if append else (src, dst)
            edge_data[c] = data
        else:
            edges[c], edge_data[c] = (old_src, old_dst), dict(g._edge_frames[c])
    return _rebuild(g, edges, edge_data, copy_ndata=True)


__all__ = [
    "SizedFrame",
    "add_reverse_edges",
    "add_self_loop",
    "from_scipy",
    "graph",
    "heterograph",
    "rand_bipartite",
    "rand_graph",
    "remove_self_loop",
    "to_bidirected",
]
