"""The oracle of neighbor sampling shared by the sampler tests of the server and the client."""

from __future__ import annotations

import numpy as np


def expected_sample_counts(available: np.ndarray, fanout: int, replace: bool) -> np.ndarray:
    """How many edges a correct sampler returns for each seed that has ``available`` edges.

    Args:
        available: the number of edges each seed may draw from.
        fanout: edges per seed; -1 takes all.
        replace: draw with replacement (then ``fanout`` edges of any seed that has one).

    Returns:
        The count per seed.
    """
    if fanout == -1:
        return available
    if replace:
        return np.where(available > 0, fanout, 0)
    return np.minimum(available, fanout)
