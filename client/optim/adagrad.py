"""``SparseAdagrad``: Adagrad over DistEmbeddings, element-wise or row-wise, state on the servers."""

from __future__ import annotations

from graphstore.client.optim.sparse_optimizer import SparseGradOptimizer, as_float
from graphstore.types import OptimizerConfig


class SparseAdagrad(SparseGradOptimizer):
    """Sparse Adagrad over DistEmbeddings, state on the servers.

    The default keeps one accumulator per element (``G += g*g``), as ``torch.optim.Adagrad`` does;
    ``rowwise=True`` keeps one per row (``G += mean(g*g)``), dividing the state memory by the
    embedding dimension. The update is ``w -= lr * g / sqrt(G + eps)``.

    Args:
        params: the DistEmbeddings to optimize.
        lr: learning rate (> 0).
        eps: added inside the square root.
        rowwise: one accumulator per row instead of per element.

    Raises:
        TypeError / ValueError: see :class:`SparseGradOptimizer`.
    """

    def __init__(self, params, lr: float, eps: float = 1e-10, rowwise: bool = False):
        kind = "rowwise_adagrad" if rowwise else "adagrad"
        super().__init__(params, OptimizerConfig(kind=kind, lr=as_float(lr, "lr"), eps=as_float(eps, "eps")))
        self.rowwise = rowwise
