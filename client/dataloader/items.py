"""The items a graph loader batches: IDs, or ``{type: IDs}`` on a typed graph (DGL's dict form), laid
out type after type so that batching, shuffling and equal batch counts see one list of items."""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np
import torch

from graphstore.ids import as_id_array


def as_item_ids(ids, name: str) -> np.ndarray:
    """A loader's items as int64 IDs.

    Args:
        ids: IDs (any integer array, tensor or sequence) or a boolean mask (numpy or torch).
        name: the argument's name, for error messages.

    Raises:
        graphstore.errors.IdTypeError / ValueError: what :func:`graphstore.ids.as_id_array` raises.
    """
    if isinstance(ids, torch.Tensor) and ids.dtype == torch.bool:
        return torch.nonzero(ids, as_tuple=True)[0].numpy()
    if isinstance(ids, np.ndarray) and ids.dtype == np.bool_:
        return np.flatnonzero(ids)
    return as_id_array(ids, name)


class LoaderItems:
    """IDs, or ``{type: IDs}`` laid out type after type.

    Args:
        items: IDs or a mask; or ``{type: IDs or mask}``.
        name: the argument's name, for error messages.
        resolve: turns a type as the user names it into its canonical name (raises KeyError for an
            unknown one); used for dict items only.

    Attributes:
        types: the types of dict items, in the order given; None for plain IDs.
    """

    def __init__(self, items, name: str, resolve: Callable):
        if isinstance(items, Mapping):
            self.types = [resolve(key) for key in items]
            self._ids = [as_item_ids(ids, f"{name}[{key!r}]") for key, ids in items.items()]
        else:
            self.types = None
            self._ids = [as_item_ids(items, name)]
        self._offsets = np.cumsum([0] + [ids.size for ids in self._ids])

    @property
    def typed(self) -> bool:
        """Whether the items came as ``{type: IDs}``."""
        return self.types is not None

    def __len__(self) -> int:
        return int(self._offsets[-1])

    def take(self, positions: np.ndarray):
        """The items at ``positions`` (of the type-after-type layout): IDs, or ``{type: IDs}`` with every
        type (in the positions' order within a type)."""
        if self.types is None:
            return self._ids[0][positions]
        kinds = np.searchsorted(self._offsets, positions, side="right") - 1
        return {
            key: ids[positions[kinds == index] - self._offsets[index]]
            for index, (key, ids) in enumerate(zip(self.types, self._ids, strict=True))
        }
