"""``dgl.distributed.DistTensor``: the native :class:`graphstore.client.DistTensor` with DGL's full
constructor and DGL's ``count_nonzero`` (nonzero elements, not rows)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from graphstore.client.dist_tensor import DistTensor as _NativeDistTensor


class DistTensor(_NativeDistTensor):
    """``DistTensor(shape, dtype, name=None, init_func=None, part_policy=None, persistent=False,
    is_gdata=True, attach=True)``.

    A name that exists already is attached to (``attach=True``); every tensor is graph data, visible
    in ``g.ndata`` / ``g.edata`` (``is_gdata=True``).

    Raises:
        NotImplementedError: ``is_gdata=False`` or ``attach=False``.
        ValueError, TypeError, RuntimeError: as :class:`graphstore.client.DistTensor`.
    """

    def __init__(
        self,
        shape,
        dtype,
        name: str | None = None,
        init_func: Callable | None = None,
        part_policy=None,
        persistent: bool = False,
        is_gdata: bool = True,
        attach: bool = True,
    ):
        if not is_gdata:
            raise NotImplementedError(
                "DistTensor(is_gdata=False) is not supported: every DistTensor is graph data, listed in "
                "g.ndata / g.edata"
            )
        if not attach:
            raise NotImplementedError(
                "DistTensor(attach=False) is not supported: a DistTensor whose name exists attaches to it"
            )
        super().__init__(shape, dtype, name, init_func, part_policy, persistent)

    def __getitem__(self, idx) -> torch.Tensor:
        """The rows of ``idx`` (DGL's parameter name); see :meth:`graphstore.client.DistTensor.read`."""
        return super().__getitem__(idx)

    def __setitem__(self, idx, val) -> None:
        """Write ``val`` into the rows of ``idx`` (DGL's parameter names)."""
        super().__setitem__(idx, val)

    def count_nonzero(self) -> int:
        """Number of nonzero elements (DGL's meaning; the native method counts rows)."""
        return self.count_in_chunks(np.count_nonzero)

    @property
    def tensor_name(self) -> str:
        """The name the servers store the tensor under (DGL's; the same as :attr:`name`)."""
        return self.name

    @property
    def kvstore_key(self) -> str:
        """DGL's key of the tensor in its key-value store: the name on the servers."""
        return self.name

    @property
    def local_partition(self) -> torch.Tensor:
        """The rows this trainer's partition owns (a copy read from the partition; DGL returns a view of
        its shared memory)."""
        policy = self.part_policy
        bounds = policy.bounds()
        return self[torch.arange(int(bounds[policy.part_id]), int(bounds[policy.part_id + 1]))]


__all__ = ["DistTensor"]
