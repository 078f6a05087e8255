"""How a new run-time tensor's rows start: zeros, a constant, or uniform / normal random values."""

from __future__ import annotations

import numpy as np

from graphstore import dtypes
from graphstore.dtypes import float32_to_bfloat16_bits
from graphstore.server.row_arithmetic import narrow
from graphstore.types import INITIALIZERS, InitSpec

# Rows generated per step by the random initializers (bounds their temporary memory).
_INIT_CHUNK_ROWS = 1 << 16


def fill_initial(array: np.ndarray, dtype: str, init: InitSpec, seed: int) -> None:
    """Fill a new tensor's local rows in place according to ``init``.

    Args:
        array: the storage array (local rows).
        dtype: its canonical dtype name.
        init: the initializer; ``uniform``/``normal`` need a float dtype.
        seed: the random seed of this partition (``init.seed + part_id``).

    Raises:
        ValueError: unknown kind, random init of a non-float dtype, ``uniform`` with a > b,
            ``normal`` with a negative std.
    """
    if init.kind in ("zeros", "pushed"):
        array[...] = 0
        return
    if init.kind == "constant":
        value = np.array([init.a], dtype=np.float64)
        array[...] = float32_to_bfloat16_bits(value.astype(np.float32))[0] if dtype == "bfloat16" else init.a
        return
    if init.kind not in ("uniform", "normal"):
        raise ValueError(f"init.kind must be one of {INITIALIZERS}, got {init.kind!r}")
    if not dtypes.info(dtype).is_float:
        raise ValueError(f"init.kind {init.kind!r} needs a floating-point dtype, got {dtype}")
    if init.kind == "uniform" and not init.a <= init.b:
        raise ValueError(f"init: uniform(a, b) needs a <= b, got a={init.a}, b={init.b}")
    if init.kind == "normal" and not init.b >= 0:
        raise ValueError(f"init: normal(mean=a, std=b) needs std >= 0, got b={init.b}")
    rng = np.random.default_rng(seed)
    flat = array.reshape(len(array), -1)
    for lo in range(0, len(flat), _INIT_CHUNK_ROWS):
        chunk_shape = flat[lo : lo + _INIT_CHUNK_ROWS].shape
        if init.kind == "uniform":
            values = init.a + (init.b - init.a) * rng.random(chunk_shape, dtype=np.float32)
        else:
            values = init.a + init.b * rng.standard_normal(chunk_shape, dtype=np.float32)
        flat[lo : lo + _INIT_CHUNK_ROWS] = narrow(values.astype(np.float32, copy=False), dtype)
