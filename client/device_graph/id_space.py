"""One ID space's per-(partition, type) layout on a device: homogeneous <-> per-type IDs with one
``searchsorted`` each, as :class:`graphstore.partition.typed_ranges.TypedRanges` does with numpy."""

from __future__ import annotations

import numpy as np
import torch

from graphstore.partition.typed_ranges import TypedRanges


def _on(array: np.ndarray, device: torch.device) -> torch.Tensor:
    return torch.tensor(np.asarray(array, dtype=np.int64), device=device)


class DeviceIdSpace:
    """A :class:`TypedRanges` (a partition book's ``node_ranges`` or ``edge_ranges``) on ``device``.

    Args:
        ranges: the layout.
        device: where the conversions run.
    """

    def __init__(self, ranges: TypedRanges, device: torch.device):
        self.num_types = ranges.num_types
        self.device = torch.device(device)
        self._seg_start = _on(ranges.seg_start, self.device)
        self._seg_type = _on(ranges.seg_type, self.device)
        self._seg_type_start = _on(ranges.seg_type_start, self.device)
        self._type_bounds = _on(ranges.type_bounds, self.device)  # [types, parts + 1]
        self._homo_start = _on(ranges.homo_start, self.device)  # [types, parts]

    def to_per_type(self, homo: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(type IDs, per-type IDs)`` of homogeneous IDs (known to be in range)."""
        if self.num_types == 1:
            return torch.zeros_like(homo), homo
        seg = torch.searchsorted(self._seg_start, homo, right=True) - 1
        return self._seg_type[seg], homo - self._seg_start[seg] + self._seg_type_start[seg]

    def to_homo(self, per_type: torch.Tensor, type_id: int) -> torch.Tensor:
        """Homogeneous IDs of per-type IDs of type ``type_id`` (known to be in range)."""
        if self.num_types == 1:
            return per_type
        bounds = self._type_bounds[type_id]
        part = torch.searchsorted(bounds, per_type, right=True) - 1
        return per_type - bounds[part] + self._homo_start[type_id][part]
