"""``SparseAdam``: Adam over DistEmbeddings with a per-row step count, state on the servers."""

from __future__ import annotations

from graphstore.client.optim.sparse_optimizer import SparseGradOptimizer, as_float
from graphstore.types import OptimizerConfig


class SparseAdam(SparseGradOptimizer):
    """Sparse Adam over DistEmbeddings, state (first and second moments, per-row step count) on the servers.

    Each row keeps its own step count, so the bias correction of a rarely seen row is that of its
    own number of updates: ``w -= lr * m_hat / (sqrt(v_hat) + eps)``.

    Args:
        params: the DistEmbeddings to optimize.
        lr: learning rate (> 0).
        betas: decay rates of the first and second moment, each in ``[0, 1)``.
        eps: added to the denominator.

    Raises:
        TypeError / ValueError: see :class:`SparseGradOptimizer`.
    """

    def __init__(self, params, lr: float, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8):
        if len(tuple(betas)) != 2:
            raise ValueError(f"betas must be a pair (beta1, beta2), got {betas!r}")
        beta1, beta2 = (as_float(b, "betas") for b in betas)
        config = OptimizerConfig(
            kind="adam", lr=as_float(lr, "lr"), eps=as_float(eps, "eps"), beta1=beta1, beta2=beta2
        )
        super().__init__(params, config)
