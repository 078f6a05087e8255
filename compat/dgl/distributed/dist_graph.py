"""``dgl.distributed.DistGraph``: the native :class:`graphstore.client.DistGraph` with DGL's return
types where they differ (a partition book whose ID methods return tensors) and DGL's extra members."""

from __future__ import annotations

from graphstore.client.dist_graph import DistGraph as _NativeDistGraph
from graphstore.compat.dgl.distributed.graph_services import sample_neighbors
from graphstore.compat.dgl.distributed.partition_book import RangePartitionBook


class DistGraph(_NativeDistGraph):
    """``DistGraph(graph_name, gpb=None, part_config=None)``; see :class:`graphstore.client.DistGraph`."""

    def get_partition_book(self) -> RangePartitionBook:
        """The partition book, DGL-style (ID methods return int64 tensors)."""
        return RangePartitionBook.of(super().get_partition_book())

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
            self, seed_nodes, fanout, edge_dir, prob, exclude_edges, replace, etype_sorted, output_device
        )


__all__ = ["DistGraph"]
