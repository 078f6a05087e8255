"""``dgl.distributed.optim``: the distributed sparse optimizers of DistEmbedding tables
(implemented in :mod:`graphstore.client.optim`)."""

from graphstore.client.optim import SparseAdagrad, SparseAdam

__all__ = ["SparseAdagrad", "SparseAdam"]
