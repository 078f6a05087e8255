"""Distributed sparse optimizers for :class:`~graphstore.client.dist_embedding.DistEmbedding`.

``SparseAdagrad`` (element-wise or row-wise) and ``SparseAdam`` update only the embedding rows a
mini-batch touched; the rows and the optimizer state live on the partition servers and a step moves
gradients only (:class:`SparseGradOptimizer` describes the step). The pure parts of a step have
their own modules: :mod:`.ownership` (which trainer owns which rows), :mod:`.exchange` (the
all-to-all of gradient rows) and :mod:`.dedup` (merging the gradients of equal ids).
"""

from graphstore.client.optim.adagrad import SparseAdagrad
from graphstore.client.optim.adam import SparseAdam
from graphstore.client.optim.sparse_optimizer import SparseGradOptimizer
from graphstore.client.optim.step_timings import StepTimings

__all__ = ["SparseAdagrad", "SparseAdam", "SparseGradOptimizer", "StepTimings"]
