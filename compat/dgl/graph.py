"""``dgl.DGLGraph`` (``DGLHeteroGraph``, ``DGLBlock``) as the type of the graphs a script gets: the
blocks and pair graphs of the loaders and the in-memory graphs of ``dgl.graph`` / ``dgl.heterograph``
(``isinstance(g, dgl.DGLGraph)`` holds, as a type hint or a check in a script does).

They are abstract types here: graphstore's mini-batch graphs are
:class:`~graphstore.client.block.Block` and
:class:`~graphstore.client.dataloader.pair_graph.PairGraph`, and its in-memory graph is
:class:`~graphstore.compat.dgl.local_graph.LocalGraph`, registered as their virtual subclasses. Build an
in-memory graph with ``dgl.graph`` / ``dgl.heterograph`` (not ``DGLGraph(...)``).
"""

from __future__ import annotations

import abc

from graphstore.client.block import Block
from graphstore.client.dataloader.pair_graph import PairGraph
from graphstore.compat.dgl.local_graph import LocalGraph


class DGLGraph(abc.ABC):  # noqa: B024 - a type to check against, with no abstract method
    """The type of blocks and pair graphs (``isinstance(g, DGLGraph)``); not constructed here.

    Raises:
        NotImplementedError: when called: graphs in memory are DGL's (see the module docstring).
    """

    def __new__(cls, *args, **kwargs):
        raise NotImplementedError(
            f"{cls.__name__}(...) is not supported: build an in-memory graph with dgl.graph((src, dst)) or "
            "dgl.heterograph({(src_type, etype, dst_type): (src, dst)})"
        )


class DGLBlock(DGLGraph):  # noqa: B024
    """The type of blocks (message-flow graphs), a :class:`DGLGraph` as in DGL."""


# DGL 2.x keeps the old name of the one graph class.
DGLHeteroGraph = DGLGraph

DGLGraph.register(PairGraph)
DGLGraph.register(LocalGraph)
DGLBlock.register(Block)

__all__ = ["DGLBlock", "DGLGraph", "DGLHeteroGraph"]
