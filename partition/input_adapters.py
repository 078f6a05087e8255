"""Graphs the partitioner takes besides arrays: in-memory DGL graphs and PyG ``Data`` / ``HeteroData``
objects, read by their public interface (neither library is imported), and renamed node / edge arrays.

- A DGL graph is recognised by ``canonical_etypes`` and a callable ``num_nodes``: it is read with
  ``num_nodes(ntype)``, ``edges(etype=...)`` and ``ndata`` / ``edata`` (``nodes[ntype].data`` /
  ``edges[etype].data`` when typed). One node type and one edge type make a homogeneous graph,
  whatever their names (as ``g.ndata`` works in DGL); DGL's ID keys ``_ID`` / ``_TYPE`` are left out
  (the partitioner keeps the original IDs itself).
- A PyG ``HeteroData`` is recognised by ``node_types`` and ``edge_types``: every node store's and edge
  store's tensors are read (``x``, ``y``, masks, ``edge_attr``, ...), the edges from ``edge_index``.
- A PyG ``Data`` is recognised by ``edge_index``: its attributes go to the nodes or the edges by
  ``is_node_attr`` / ``is_edge_attr``.

Names are kept as they are (``x`` stays ``x``); :func:`rename_arrays` (``graphstore partition
--ndata-map x=feat``) renames them.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping

import numpy as np

from graphstore.partition.graph import GraphData, validate_graph
from graphstore.partition.typed_input import edge_key, graph_from_typed_arrays, node_key, num_nodes_key

logger = logging.getLogger(__name__)

# Keys DGL keeps its own ID bookkeeping under (dgl.NID / dgl.NTYPE); not data of the graph.
DGL_RESERVED_KEYS = ("_ID", "_TYPE")
# PyG attributes that describe the structure, not data to partition.
PYG_STRUCTURE_KEYS = ("edge_index", "num_nodes", "adj_t")


def to_numpy(value, what: str) -> np.ndarray:
    """A CPU numpy array of a tensor or array (bfloat16 tensors become float32).

    Raises:
        TypeError: a value that is not array-like.
    """
    if hasattr(value, "detach"):  # a torch tensor
        value = value.detach().cpu()
        if str(value.dtype) == "torch.bfloat16":
            value = value.float()
        return value.numpy()
    try:
        return np.asarray(value)
    except Exception as exc:  # noqa: BLE001 - re-raised with the array's name
        raise TypeError(f"{what} is not an array or tensor: {type(value).__name__}") from exc


def is_dgl_graph(obj) -> bool:
    """Whether ``obj`` has DGLGraph's interface."""
    return (
        hasattr(obj, "canonical_etypes")
        and callable(getattr(obj, "num_nodes", None))
        and hasattr(obj, "edges")
    )


def is_pyg_hetero_data(obj) -> bool:
    """Whether ``obj`` has PyG ``HeteroData``'s interface."""
    return hasattr(obj, "node_types") and hasattr(obj, "edge_types") and not is_dgl_graph(obj)


def is_pyg_data(obj) -> bool:
    """Whether ``obj`` has PyG ``Data``'s interface."""
    return hasattr(obj, "edge_index") and not is_dgl_graph(obj) and not is_pyg_hetero_data(obj)


def is_graph_object(obj) -> bool:
    """Whether :func:`graph_from_object` takes ``obj``."""
    return is_dgl_graph(obj) or is_pyg_hetero_data(obj) or is_pyg_data(obj)


def graph_from_object(obj) -> GraphData:
    """A validated :class:`GraphData` from a DGL graph or a PyG ``Data`` / ``HeteroData``.

    Raises:
        TypeError: an object of neither interface.
        ValueError: inconsistent sizes (the message names the array).
    """
    if is_dgl_graph(obj):
        return _from_dgl(obj)
    if is_pyg_hetero_data(obj):
        return _from_pyg_hetero(obj)
    if is_pyg_data(obj):
        return _from_pyg_data(obj)
    raise TypeError(
        f"cannot read a graph from {type(obj).__name__}: expected a DGL graph, a PyG Data / HeteroData, "
        "a dict of arrays, a GraphData or a file path"
    )


def _data_items(frame: Mapping, what: str) -> dict[str, np.ndarray]:
    return {
        str(name): to_numpy(value, f"{what} {name!r}")
        for name, value in dict(frame).items()
        if name not in DGL_RESERVED_KEYS
    }


def _from_dgl(g) -> GraphData:
    ntypes, canonical_etypes = list(g.ntypes), [tuple(c) for c in g.canonical_etypes]
    if len(ntypes) == 1 and len(canonical_etypes) == 1:
        src, dst = g.edges()
        return _homogeneous(
            int(g.num_nodes()),
            to_numpy(src, "src"),
            to_numpy(dst, "dst"),
            _data_items(g.ndata, "node data"),
            _data_items(g.edata, "edge data"),
        )
    arrays: dict[str, np.ndarray] = {}
    for ntype in ntypes:
        arrays[num_nodes_key(ntype)] = np.asarray(int(g.num_nodes(ntype)), dtype=np.int64)
        for name, value in _data_items(g.nodes[ntype].data, f"node data of {ntype!r}").items():
            arrays[node_key(ntype, name)] = value
    for canonical in canonical_etypes:
        src, dst = g.edges(etype=canonical)
        arrays[edge_key(canonical, "src")] = to_numpy(src, "src")
        arrays[edge_key(canonical, "dst")] = to_numpy(dst, "dst")
        for name, value in _data_items(g.edges[canonical].data, f"edge data of {canonical!r}").items():
            arrays[edge_key(canonical, name)] = value
    return graph_from_typed_arrays(arrays)


def _store_items(store, what: str) -> dict[str, np.ndarray]:
    keys = store.keys() if callable(getattr(store, "keys", None)) else list(store.keys)
    out = {}
    for name in keys:
        if name in PYG_STRUCTURE_KEYS:
            continue
        value = store[name]
        if not hasattr(value, "shape"):
            logger.warning("%s: attribute %r is not a tensor (%s); it is not partitioned", what, name, value)
            continue
        out[str(name)] = to_numpy(value, f"{what} {name!r}")
    return out


def _edge_index(store, what: str) -> tuple[np.ndarray, np.ndarray]:
    edge_index = to_numpy(store["edge_index"], f"{what} edge_index")
    if edge_index.ndim != 2 or edge_index.shape[0] != 2:
        raise ValueError(f"{what}: edge_index must have shape [2, E], got {list(edge_index.shape)}")
    return edge_index[0].astype(np.int64), edge_index[1].astype(np.int64)


def _from_pyg_data(data) -> GraphData:
    src, dst = _edge_index(data, "Data")
    num_nodes = int(data.num_nodes)
    node_data, edge_data = {}, {}
    placed_by_pyg = callable(getattr(data, "is_node_attr", None))
    for name, value in _store_items(data, "Data").items():
        if placed_by_pyg and data.is_edge_attr(name):
            edge_data[name] = value
        elif placed_by_pyg and data.is_node_attr(name):
            node_data[name] = value
        elif not placed_by_pyg and value.ndim and value.shape[0] == num_nodes:
            node_data[name] = value
        elif not placed_by_pyg and value.ndim and value.shape[0] == src.size:
            edge_data[name] = value
        else:
            raise ValueError(
                f"Data attribute {name!r} (shape {list(value.shape)}) is neither node nor edge data"
            )
    return _homogeneous(num_nodes, src, dst, node_data, edge_data)


def _homogeneous(num_nodes: int, src, dst, node_data: dict, edge_data: dict) -> GraphData:
    graph = GraphData.homogeneous(num_nodes, np.asarray(src), np.asarray(dst), node_data, edge_data)
    validate_graph(graph)
    return graph


def _from_pyg_hetero(data) -> GraphData:
    arrays: dict[str, np.ndarray] = {}
    for ntype in data.node_types:
        store = data[ntype]
        arrays[num_nodes_key(ntype)] = np.asarray(int(store.num_nodes), dtype=np.int64)
        for name, value in _store_items(store, f"node type {ntype!r}").items():
            arrays[node_key(ntype, name)] = value
    for canonical in data.edge_types:
        canonical = tuple(canonical)
        store = data[canonical]
        what = f"edge type {canonical!r}"
        arrays[edge_key(canonical, "src")], arrays[edge_key(canonical, "dst")] = _edge_index(store, what)
        for name, value in _store_items(store, what).items():
            arrays[edge_key(canonical, name)] = value
    return graph_from_typed_arrays(arrays)


def parse_name_map(text: str | None, option: str) -> dict[str, str]:
    """``"x=feat,y=label"`` -> ``{"x": "feat", "y": "label"}`` (``ntype/x=feat`` renames one type's).

    Raises:
        ValueError: an item without ``=`` or with an empty side (the message names the option).
    """
    mapping: dict[str, str] = {}
    for item in (text or "").split(","):
        item = item.strip()
        if not item:
            continue
        old, sep, new = (part.strip() for part in item.partition("="))
        if not sep or not old or not new:
            raise ValueError(f"{option}: expected OLD=NEW items separated by commas, got {item!r}")
        mapping[old] = new
    return mapping


def rename_arrays(
    graph: GraphData, node_names: Mapping[str, str] | None = None, edge_names: Mapping[str, str] | None = None
) -> GraphData:
    """The graph with node and edge arrays renamed (the arrays themselves are shared, not copied).

    Args:
        graph: the graph (left unchanged).
        node_names: ``{old: new}``: ``old`` is an array name (renamed in every node type that has it) or
            ``ntype/name`` (one type's).
        edge_names: the same for edge arrays (``src:etype:dst/name`` for one edge type).

    Returns:
        A new :class:`GraphData`, validated.

    Raises:
        ValueError: a name no type has, or a new name that is taken (the message names both).
    """
    renamed = {}
    for kind, data, mapping in (("node", graph.node_data, node_names), ("edge", graph.edge_data, edge_names)):
        data = {type_key: dict(arrays) for type_key, arrays in data.items()}
        for old, new in (mapping or {}).items():
            type_key, _, name = old.rpartition("/")
            targets = [t for t, arrays in data.items() if name in arrays and (not type_key or t == type_key)]
            if not targets:
                known = sorted({n for arrays in data.values() for n in arrays})
                raise ValueError(
                    f"{kind} array {old!r} (renamed to {new!r}) does not exist; the graph has {known}"
                )
            for target in targets:
                if new in data[target]:
                    raise ValueError(f"cannot rename {kind} array {old!r} to {new!r}: {new!r} already exists")
                data[target] = {new if key == name else key: value for key, value in data[target].items()}
        renamed[kind] = data
    out = dataclasses.replace(graph, node_data=renamed["node"], edge_data=renamed["edge"])
    validate_graph(out)
    return out
