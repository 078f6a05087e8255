"""Mini-batch loaders for distributed training: sampling and feature pulls run ahead in background
threads while the model trains on the current batch.

- :class:`DistDataLoader`: batches of a dataset of IDs through a user ``collate_fn`` (DGL's API).
- :class:`DistNodeDataLoader`: node classification: ``(input_nodes, output_nodes, blocks)`` with
  the input features on ``blocks[0].srcdata`` and the labels on ``blocks[-1].dstdata``.
- :class:`DistEdgeDataLoader`: link prediction: ``(input_nodes, pair_graph, [neg_pair_graph,] blocks)``
  with :class:`PairGraph` pairs.
- :class:`RemoteFeatureCache`: an opt-in copy of the hottest remote rows of a feature, in host or GPU
  memory, with hit and pull counters (:class:`FeatureCacheStats`).

The graph loaders put the whole batch on their ``device`` (:mod:`.device_transfer`: pinned staging and
non-blocking copies on a side CUDA stream).

Every loader yields the same number of batches on every trainer rank (DDP would hang otherwise):
the ranks agree on the largest batch count (an all-reduce over ``torch.distributed`` when it is
initialized), and a rank with fewer batches adds full batches taken by wrapping around its own
(shuffled) items (:mod:`.batching`). Batches are produced in order by a small thread pool,
``prefetch`` batches ahead, in threads named ``LOADER_THREAD_PREFIX...`` (:mod:`.prefetch`).
"""

from graphstore.client.dataloader.dataset_loader import DistDataLoader
from graphstore.client.dataloader.edge_loader import DistEdgeDataLoader
from graphstore.client.dataloader.feature_cache import FeatureCacheStats, RemoteFeatureCache
from graphstore.client.dataloader.node_loader import DistNodeDataLoader
from graphstore.client.dataloader.pair_graph import PairGraph
from graphstore.client.dataloader.prefetch import LOADER_THREAD_PREFIX

__all__ = [
    "LOADER_THREAD_PREFIX",
    "DistDataLoader",
    "DistEdgeDataLoader",
    "DistNodeDataLoader",
    "FeatureCacheStats",
    "PairGraph",
    "RemoteFeatureCache",
]
