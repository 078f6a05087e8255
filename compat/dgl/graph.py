"""``dgl.DGLGraph`` (``DGLHeteroGraph``, ``DGLBlock``) as the type of the graphs a distributed script
gets: the blocks and pair graphs of the loaders (``isinstance(block, dgl.DGLGraph)`` holds, as a type
hint or a check in a script does).

They are abstract types here: graphstore's mini-batch graphs are
:class:`~graphstore.client.block.Block` and
:class:`~graphstore.client.dataloader.pair_graph.PairGraph`, registered as their virtual subclasses.
Building a graph in memory (``dgl.graph``, ``dgl.heterograph``, ``DGLGraph(...)``) is DGL's: hand that
graph to ``partition_graph``.
"""

from __future__ import annotations

import abc

from graphstore.client.block import Block
from graphstore.client.dataloader.pair_graph import PairGraph


class DGLGraph(abc.ABC):  # noqa: B024 - a type to check against, with no abstract method
    """The type of blocks and pair graphs (``isinstance(g, DGLGraph)``); not constructed here.

    Raises:
        NotImplementedError: when called: graphs in memory are DGL's (see the module docstring).
    """

    def __new__(cls, *args, **kwargs):
        raise NotImplementedError(
            f"{cls.__name__}(...) is not supported: graphstore builds no graphs in memory; build the graph "
            "with DGL (or PyG) and pass it to dgl.distributed.partition_graph"
        )


class DGLBlock(DGLGraph):  # noqa: B024
    """The type of blocks (message-flow graphs), a :class:`DGLGraph` as in DGL."""


# DGL 2.x keeps the old name of the one graph class.
DGLHeteroGraph = DGLGraph

DGLGraph.register(PairGraph)
DGLBlock.register(Block)

__all__ = ["DGLBlock", "DGLGraph", "DGLHeteroGraph"]
