"""Arithmetic on stored rows: 16-bit floats are widened to float32 for the sums and narrowed back.

bfloat16 rows are stored as their uint16 bit patterns (see :mod:`graphstore.dtypes`) and float16
rows lose precision when summed in place, so both are summed in float32 and rounded once.
"""

from __future__ import annotations

import numpy as np

from graphstore.dtypes import bfloat16_bits_to_float32, float32_to_bfloat16_bits


def widen(values: np.ndarray, dtype: str) -> np.ndarray:
    """Values in a dtype safe to accumulate in (float32 for the 16-bit floats).

    Args:
        values: values in storage form (bfloat16 as uint16 bits).
        dtype: canonical dtype name of ``values``.

    Returns:
        float32 values for ``bfloat16`` and ``float16``; ``values`` unchanged otherwise.
    """
    if dtype == "bfloat16":
        return bfloat16_bits_to_float32(values)
    if dtype == "float16":
        return values.astype(np.float32)
    return values


def narrow(values: np.ndarray, dtype: str) -> np.ndarray:
    """Values back in the storage form of ``dtype`` (the inverse of :func:`widen`, rounding once).

    Args:
        values: float32 values for the 16-bit floats, any values otherwise.
        dtype: canonical dtype name to store them as.

    Returns:
        uint16 bits for ``bfloat16``, float16 for ``float16``; ``values`` unchanged otherwise.
    """
    if dtype == "bfloat16":
        return float32_to_bfloat16_bits(values)
    if dtype == "float16":
        return values.astype(np.float16)
    return values


def scatter_add(data: np.ndarray, local: np.ndarray, rows: np.ndarray, dtype: str) -> None:
    """``data[local] += rows`` summing repeated indices, in a wide enough dtype for 16-bit floats.

    Args:
        data: storage array to update in place.
        local: int64 local row indices (may repeat).
        rows: values in storage form, ``rows.shape == (len(local), *data.shape[1:])``.
        dtype: canonical dtype name of ``data``.
    """
    if len(local) == 0:
        return
    uniq, inverse = np.unique(local, return_inverse=True)
    if len(uniq) == len(local) and dtype not in ("bfloat16", "float16"):
        data[local] += rows
        return
    acc = widen(data[uniq], dtype)
    np.add.at(acc, inverse, widen(rows, dtype))
    data[uniq] = narrow(acc, dtype)
