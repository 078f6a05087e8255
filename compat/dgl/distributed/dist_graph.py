"""``dgl.distributed.DistGraph``: the native :class:`graphstore.client.DistGraph` with DGL's return
types where they differ (a partition book whose ID methods return tensors) and DGL's extra members."""

from __future__ import annotations

from graphstore.client.dist_graph import DistGraph as _NativeDistGraph
from graphstore.compat.dgl.distributed.graph_services import edge_subgraph, sample_neighbors
from graphstore.compat.dgl.distributed.partition_book import RangePartitionBook


class DistGraph(_NativeDistGraph):
    """``DistGraph(graph_name, gpb=None, part_config=None)``; see :class:`graphstore.client.DistGraph`."""

    def get_partition_book(self) -> RangePartitionBook:
        """The partition book, DGL-style (ID methods return int64 tensors)."""
        return RangePartitionBook.of(super().get_partition_book())

    def out_degrees(self, u=None, etype=None):
        """Out-degrees of all nodes (None) or of ``u`` (DGL's parameter name); see
        :meth:`graphstore.client.DistGraph.out_degrees`."""
        return super().out_degrees(u, etype)

    def is_pinned(self) -> bool:
        """Whether the graph's structure is in page-locked memory: never (it is on the servers)."""
        return False

    def sample_neighbors(
        self,
        seed_nodes,
        fanout: int,
        edge_dir: str = "in",
        prob=None,
        exclude_edges=None,
        replace: bool = False,
        etype_sorted: bool = True,
        output_device=None,
    ):
        """Sample up to ``fanout`` edges of each seed; see
        :func:`graphstore.compat.dgl.distributed.sample_neighbors`."""
        return sample_neighbors(
            self,
            seed_nodes,
            fanout,
            edge_dir,
            prob,
            exclude_edges,
            replace,
            etype_sorted=etype_sorted,
            output_device=output_device,
        )

    def edge_subgraph(self, edges, relabel_nodes: bool = True, store_ids: bool = True):
        """The subgraph of the given edges (only those edges are read from the servers); see
        :func:`graphstore.compat.dgl.distributed.graph_services.edge_subgraph`."""
        return edge_subgraph(self, edges, relabel_nodes, store_ids)

    @property
    def _client(self) -> _KVClient:
        """DGL's key-value client of the graph, which DGL's own examples reach for to call ``barrier()``."""
        return _KVClient(self)


class _KVClient:
    """What scripts use of DGL's ``DistGraph._client``: ``barrier()`` (every trainer of the job).

    Args:
        graph: the DistGraph.
    """

    def __init__(self, graph: DistGraph):
        self._graph = graph

    def barrier(self) -> None:
        """Wait until every trainer of the job reaches this barrier (``DistGraph.barrier``)."""
        self._graph.barrier()


__all__ = ["DistGraph"]
