"""A small in-memory graph with the part of DGLGraph's interface that graph readers use (no DGL build
matches torch 2.13): ``ntypes``, ``canonical_etypes``, ``num_nodes(ntype)``, ``edges(etype=...)`` and
``edges[etype].data``, ``nodes[ntype].data``, and ``ndata`` / ``edata`` on a one-type graph.

Build it the way ``dgl.heterograph`` is called::

    g = DGLLikeGraph({("user", "follows", "user"): (src, dst)}, {"user": 5})
    g.nodes["user"].data["feat"] = torch.randn(5, 4)
"""

from __future__ import annotations

import torch


class _TypeView:
    """``view[type].data`` (a dict) and, for edges, ``view(etype=...)`` returning ``(src, dst)``."""

    def __init__(self, frames: dict, call=None):
        self._frames, self._call = frames, call

    def __getitem__(self, key):
        return _Frame(self._frames[key])

    def __call__(self, *args, **kwargs):
        return self._call(*args, **kwargs)


class _Frame:
    def __init__(self, data: dict):
        self.data = data


class DGLLikeGraph:
    """A typed (or one-type) graph in DGL's shape; see the module docstring."""

    def __init__(self, edges: dict, num_nodes: dict[str, int]):
        self._edges = {tuple(c): (torch.as_tensor(s), torch.as_tensor(d)) for c, (s, d) in edges.items()}
        self._num_nodes = dict(num_nodes)
        self._node_frames = {ntype: {} for ntype in self._num_nodes}
        self._edge_frames = {c: {} for c in self._edges}
        self.nodes = _TypeView(self._node_frames)
        self.edges = _TypeView(self._edge_frames, self._edges_of)

    @property
    def ntypes(self) -> list[str]:
        return list(self._num_nodes)

    @property
    def canonical_etypes(self) -> list[tuple[str, str, str]]:
        return list(self._edges)

    def _only(self, mapping: dict):
        if len(mapping) != 1:
            raise RuntimeError("the graph has several types; name one")
        return next(iter(mapping))

    def num_nodes(self, ntype: str | None = None) -> int:
        if ntype is None:
            return sum(self._num_nodes.values())
        return self._num_nodes[ntype]

    def _edges_of(self, form: str = "uv", order: str = "eid", etype=None):
        canonical = self._only(self._edges) if etype is None else tuple(etype)
        return self._edges[canonical]

    @property
    def ndata(self) -> dict:
        return self._node_frames[self._only(self._node_frames)]

    @property
    def edata(self) -> dict:
        return self._edge_frames[self._only(self._edge_frames)]
