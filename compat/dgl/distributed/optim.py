"""``dgl.distributed.optim``: the distributed sparse optimizers of DistEmbedding tables
(implemented in :mod:`graphstore.client.optim`); ``DistSparseGradOptimizer`` is their base class."""

from graphstore.client.optim import SparseAdagrad, SparseAdam, SparseGradOptimizer

DistSparseGradOptimizer = SparseGradOptimizer

__all__ = ["DistSparseGradOptimizer", "SparseAdagrad", "SparseAdam"]
