"""PyG's ``FeatureStore`` over a DistGraph's node and edge data (:class:`~graphstore.client.DistTensor`).

A PyG ``TensorAttr(group_name, attr_name, index)`` names one tensor and rows of it:

- ``group_name``: a node type (``None`` on a homogeneous graph), or an edge type ``(src, rel, dst)`` for
  edge data (any triple on a homogeneous graph names its one edge type);
- ``attr_name``: PyG's name (``x``, ``y``, ...), mapped to the stored name by ``names`` (``x`` ->
  ``feat``, ``y`` -> ``label`` by default; a name not in the mapping is its own stored name);
- ``index``: node (or edge) IDs of that type, a slice, or None for every row.

PyG's loaders call :meth:`FeatureStore.get_all_tensor_attrs` once per batch and pull every attribute it
lists for the batch's nodes (``multi_get_tensor``): it lists the node attributes of ``names`` that the
graph holds, and those added with ``put_tensor``; the other stored tensors are read by name on request.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
from torch_geometric.data import FeatureStore as _PyGFeatureStore
from torch_geometric.data import TensorAttr

from graphstore.client.dist_tensor import DistTensor

# PyG's attribute names -> the names graphstore's partitioner stores (and DGL's examples use).
DEFAULT_NAMES: dict[str, str] = {"x": "feat", "y": "label"}


class FeatureStore(_PyGFeatureStore):
    """PyG's ``FeatureStore`` over a :class:`~graphstore.client.DistGraph`.

    Reads go to the co-located partition's mapped files and to the servers (one pull per tensor per
    batch: rows of every partition requested at once); writes (``put_tensor``) go to the servers and
    need a writable tensor (one created at run time, or features served with ``--writable-features``).

    Args:
        g: the DistGraph (standalone or connected).
        names: PyG attribute name -> stored name; None: :data:`DEFAULT_NAMES`. The attributes listed
            for PyG's loaders are these names, on every node type that stores them.

    Raises:
        TypeError: ``names`` that is not a mapping of strings.
    """

    def __init__(self, g, names: Mapping[str, str] | None = None):
        super().__init__()
        names = dict(DEFAULT_NAMES if names is None else names)
        for key, value in names.items():
            if not isinstance(key, str) or not isinstance(value, str) or not key or not value:
                raise TypeError(
                    f"names must map PyG attribute names to stored names (strings), got {names!r}"
                )
        self.graph = g
        self.names = names
        self._homogeneous = bool(g.is_homogeneous)
        self._tensors: dict[tuple, DistTensor] = {}
        self._attrs = self._listed_attrs()

    # ----- names -------------------------------------------------------------------------------

    def _group(self, group_name):
        """``(kind, graphstore type)`` of a PyG group: ``('node', ntype)`` or ``('edge', canonical)``.

        Raises:
            KeyError: an unknown node or edge type.
        """
        if isinstance(group_name, (tuple, list)):
            if self._homogeneous:
                return "edge", None
            return "edge", tuple(self.graph.to_canonical_etype(tuple(group_name)))
        if group_name is None:
            if not self._homogeneous:
                raise KeyError(
                    f"group_name None names no node type on a typed graph; types: {self.graph.ntypes}"
                )
            return "node", None
        if self._homogeneous and group_name in self.graph.ntypes:
            return "node", None
        if group_name not in self.graph.ntypes:
            raise KeyError(f"unknown node type {group_name!r}; node types: {self.graph.ntypes}")
        return "node", group_name

    def stored_name(self, attr_name: str) -> str:
        """The stored name of a PyG attribute name (``x`` -> ``feat`` by default)."""
        return self.names.get(attr_name, attr_name)

    def _view(self, kind: str, type_name):
        views = self.graph.nodes if kind == "node" else self.graph.edges
        return views[type_name].data

    def _tensor(self, attr: TensorAttr) -> DistTensor | None:
        """The DistTensor of an attribute, or None when the graph has none of that name."""
        kind, type_name = self._group(attr.group_name)
        key = (kind, type_name, attr.attr_name)
        tensor = self._tensors.get(key)
        if tensor is None:
            view = self._view(kind, type_name)
            stored = self.stored_name(attr.attr_name)
            if stored not in view:
                return None
            tensor = view[stored]
            self._tensors[key] = tensor
        return tensor

    def _listed_attrs(self) -> list[TensorAttr]:
        attrs = []
        groups = [None] if self._homogeneous else list(self.graph.ntypes)
        for group in groups:
            view = self._view("node", group)
            for attr_name, stored in self.names.items():
                if stored in view:
                    attrs.append(TensorAttr(group_name=group, attr_name=attr_name))
        return attrs

    # ----- PyG's interface ---------------------------------------------------------------------

    def get_all_tensor_attrs(self) -> list[TensorAttr]:
        """The node attributes PyG's loaders pull per batch: every name of ``names`` that a node type
        stores, and every node attribute added with ``put_tensor`` (fresh objects, as PyG expects)."""
        return [TensorAttr(group_name=a.group_name, attr_name=a.attr_name) for a in self._attrs]

    def _get_tensor(self, attr: TensorAttr) -> torch.Tensor | None:
        tensor = self._tensor(attr)
        if tensor is None:
            return None
        return tensor.read(_index(attr.index, len(tensor)))

    def _multi_get_tensor(self, attrs: list[TensorAttr]) -> list[torch.Tensor | None]:
        # One pull per distinct (tensor, index) of the batch: the loaders ask for several attributes of
        # the same nodes; a tensor named twice (two PyG names of one stored name) is read once.
        results: list[torch.Tensor | None] = []
        done: dict[tuple[int, int], torch.Tensor] = {}
        for attr in attrs:
            tensor = self._tensor(attr)
            if tensor is None:
                results.append(None)
                continue
            key = (id(tensor), id(attr.index))
            if key not in done:
                done[key] = tensor.read(_index(attr.index, len(tensor)))
            results.append(done[key])
        return results

    def _get_tensor_size(self, attr: TensorAttr) -> tuple[int, ...] | None:
        tensor = self._tensor(attr)
        return None if tensor is None else tuple(tensor.shape)

    def _put_tensor(self, tensor, attr: TensorAttr) -> bool:
        """Write rows of an existing tensor (``index`` given, or every row), or create a tensor on the
        servers from a full one (a new name, ``index`` None).

        Raises:
            PermissionError: the tensor is read-only (loaded from the partition files).
            KeyError: rows of a tensor that does not exist.
            ValueError, TypeError: rows of the wrong shape or dtype.
        """
        if not isinstance(tensor, torch.Tensor):
            tensor = torch.as_tensor(tensor)
        existing = self._tensor(attr)
        if existing is not None:
            index = slice(None) if attr.index is None else _index(attr.index, len(existing))
            existing.write(index, tensor)
            return True
        if attr.index is not None:
            raise KeyError(
                f"no tensor {attr.attr_name!r} (stored as {self.stored_name(attr.attr_name)!r}) of group "
                f"{attr.group_name!r} to write rows of; put the full tensor first (index=None)"
            )
        kind, type_name = self._group(attr.group_name)
        view = self._view(kind, type_name)
        view[self.stored_name(attr.attr_name)] = tensor
        self._tensors.pop((kind, type_name, attr.attr_name), None)
        if kind == "node":
            self._attrs.append(TensorAttr(group_name=attr.group_name, attr_name=attr.attr_name))
        return True

    def _remove_tensor(self, attr: TensorAttr) -> bool:
        """Delete a tensor on the servers; False when there is none.

        Raises:
            PermissionError: data loaded from the partition files (never deleted).
        """
        tensor = self._tensor(attr)
        if tensor is None:
            return False
        kind, type_name = self._group(attr.group_name)
        tensor.delete()
        view = self._view(kind, type_name)
        stored = self.stored_name(attr.attr_name)
        try:
            del view[stored]
        except KeyError:
            pass
        self._tensors.pop((kind, type_name, attr.attr_name), None)
        self._attrs = [
            a for a in self._attrs if not (a.group_name == attr.group_name and a.attr_name == attr.attr_name)
        ]
        return True

    def __repr__(self) -> str:
        return f"FeatureStore(graph={self.graph.graph_name!r}, attrs={self._attrs_repr()})"

    def _attrs_repr(self) -> list:
        return [(a.group_name, a.attr_name) for a in self._attrs]


def _index(index, num_rows: int):
    """A PyG ``TensorAttr.index`` as a DistTensor index (None: every row)."""
    if index is None:
        return slice(0, num_rows)
    return index
