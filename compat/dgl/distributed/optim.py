"""``dgl.distributed.optim``: the distributed sparse optimizers of DistEmbedding tables (implemented in
:mod:`graphstore.client.optim`), and ``DistSparseGradOptimizer``, DGL's interface of them
(``isinstance(opt, DistSparseGradOptimizer)`` holds for both)."""

from __future__ import annotations

import abc

from graphstore.client.optim import SparseAdagrad as _SparseAdagrad
from graphstore.client.optim import SparseAdam as _SparseAdam


class DistSparseGradOptimizer(abc.ABC):  # noqa: B024 - DGL's interface; the optimizers implement it
    """DGL's base class of the sparse optimizers, with its members' signatures; :class:`SparseAdagrad`
    and :class:`SparseAdam` implement it (their state lives on the servers)."""

    def __init__(self, params, lr):
        raise NotImplementedError("DistSparseGradOptimizer is an interface: use SparseAdagrad or SparseAdam")

    def step(self):
        """Apply the recorded gradients to the rows on the servers."""
        raise NotImplementedError

    def zero_grad(self):
        """Forget the recorded lookups."""
        raise NotImplementedError

    def save(self, f):
        """Save the tables' optimizer state."""
        raise NotImplementedError

    def load(self, f):
        """Load the tables' optimizer state."""
        raise NotImplementedError

    def local_state_dict(self):
        """Not supported: the state lives on the servers (``save`` / ``load``)."""
        raise NotImplementedError("local_state_dict() is not supported: use save(f) / load(f)")

    def load_local_state_dict(self, local_state_dict):
        """Not supported: see :meth:`local_state_dict`."""
        raise NotImplementedError("load_local_state_dict() is not supported: use save(f) / load(f)")

    def update(self, idx, grad, emb):
        """Not supported: DGL's internal per-table step; ``step()`` does it."""
        raise NotImplementedError("update() is DGL's internal step; call step()")


class _DglNames:
    """DGL's parameter names of ``save`` / ``load``, and DGL's ``zero_grad``, on the optimizers."""

    def zero_grad(self):
        """Clear the gradients of the recorded rows, keeping the lookups (DGL's meaning: its scripts call
        ``zero_grad()`` between the forward pass and ``backward()``); ``step()`` forgets the lookups."""
        for emb in self._params:
            for _, rows in emb.trace:
                rows.grad = None

    def save(self, f):
        """Save the tables' optimizer state to the file ``f`` (see ``graphstore.client.optim``)."""
        return super().save(f)

    def load(self, f):
        """Load the tables' optimizer state from the file ``f``."""
        return super().load(f)


class SparseAdagrad(_DglNames, _SparseAdagrad, DistSparseGradOptimizer):
    """``SparseAdagrad(params, lr, eps=1e-10)`` over DistEmbedding tables."""


class SparseAdam(_DglNames, _SparseAdam, DistSparseGradOptimizer):
    """``SparseAdam(params, lr, betas=(0.9, 0.999), eps=1e-08)`` over DistEmbedding tables."""


__all__ = ["DistSparseGradOptimizer", "SparseAdagrad", "SparseAdam"]
