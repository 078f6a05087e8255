"""PyTorch Geometric's remote-backend interface over graphstore: PyG's own loaders on a DistGraph.

PyG keeps, for graphs held outside the process, a pair of stores and a sampler that its
``NodeLoader`` / ``LinkLoader`` accept (``data=(feature_store, graph_store)``, ``node_sampler=`` /
``link_sampler=``). This package implements the three over a :class:`~graphstore.client.DistGraph`,
standalone or connected to partition servers:

- :class:`FeatureStore`: PyG's ``FeatureStore`` over the graph's node and edge data (``x`` / ``y`` mapped
  to the stored ``feat`` / ``label``; per node type on a typed graph).
- :class:`GraphStore`: PyG's ``GraphStore``: every canonical edge type in COO, CSC and CSR, pulled from
  the partitions only when asked for.
- :class:`NeighborSampler`: a PyG ``BaseSampler`` whose hops sample on the partition servers (the
  co-located partition in-process) and whose output is PyG's ``SamplerOutput`` /
  ``HeteroSamplerOutput``, relabelled as PyG's own ``NeighborSampler`` does.

Example::

    from torch_geometric.loader import NodeLoader
    from graphstore.compat.pyg import FeatureStore, GraphStore, NeighborSampler

    g = DistGraph("cora", part_config="data/cora/cora.json")
    loader = NodeLoader((FeatureStore(g), GraphStore(g)), node_sampler=NeighborSampler(g, [10, 10]),
                        input_nodes=train_nodes, batch_size=1024, shuffle=True)

torch_geometric is imported here and nowhere else in the package (``pip install graphstore[pyg]``).
See docs/pyg.md.
"""

from graphstore.compat.pyg.feature_store import DEFAULT_NAMES, FeatureStore
from graphstore.compat.pyg.graph_store import GraphStore
from graphstore.compat.pyg.sampler import NeighborSampler

__all__ = ["DEFAULT_NAMES", "FeatureStore", "GraphStore", "NeighborSampler", "stores"]


def stores(g, names=None) -> tuple[FeatureStore, GraphStore]:
    """``(FeatureStore(g, names), GraphStore(g))``: the ``data`` argument of PyG's loaders.

    Args:
        g: the DistGraph.
        names: PyG attribute name -> stored name (see :class:`FeatureStore`).

    Returns:
        The two stores.
    """
    return FeatureStore(g, names=names), GraphStore(g)
