"""The rules every neighbor sampler shares: what a fanout may be, and how a seed becomes the random
seeds of one mini-batch's sampling calls.

One home for both, so the trainer's samplers (``graphstore.client.samplers``, the per-type calls, the
GPU kernels), the PyG namespace's sampler and the server's sampler accept the same fanouts and draw the
same sample from the same seed.

A fanout is the number of neighbors a sampling call takes per seed node: an integer ``>= 0``, or ``-1``
for every neighbor. numpy integers are accepted; ``bool`` is refused (``True`` is not a count), and so is
``2**31`` and above (the wire carries an ``int32``). A layer of a typed graph's sampler may give one
fanout per edge type (``{etype: fanout}``; 0 skips a type).
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping
from typing import Any

import numpy as np

from graphstore.ids import to_numpy

# The largest fanout: the wire's fanout fields are int32.
MAX_FANOUT = 2**31 - 1


def check_fanout(value: Any, what: str = "fanout") -> int:
    """One fanout, checked and returned as a Python int.

    Args:
        value: the fanout: an int or numpy integer, ``-1`` for every neighbor.
        what: how the message names it.

    Returns:
        ``int(value)``.

    Raises:
        ValueError: a bool, a non-integer, a value below -1 or above :data:`MAX_FANOUT` (named with
            the value).
    """
    if (
        isinstance(value, (bool, np.bool_))
        or not isinstance(value, (int, np.integer))
        or not -1 <= value <= MAX_FANOUT
    ):
        raise ValueError(f"{what} must be -1 (all neighbors) or an integer in [0, 2**31), got {value!r}")
    return int(value)


def check_layer_fanout(value: Any, what: str = "fanout") -> int | dict:
    """One sampling layer's fanout: an int for every edge type, or ``{etype: int}``.

    Args:
        value: an int (numpy integers accepted) or a mapping of edge types to ints.
        what: how the message names it.

    Returns:
        The int, or a new dict with the same keys and int values (the keys are the caller's to resolve
        against the graph's edge types).

    Raises:
        ValueError: a value :func:`check_fanout` refuses (the edge type named for a dict), or an empty
            dict.
    """
    if isinstance(value, Mapping):
        if not value:
            raise ValueError(f"{what} names no edge type: give {{etype: fanout}} with at least one")
        return {etype: check_fanout(v, f"{what}[{etype!r}]") for etype, v in value.items()}
    return check_fanout(value, what)


def per_etype_fanouts(fanout: Any, num_etypes: int) -> list[int]:
    """One fanout per edge type, in type-ID order, from one int for all types or a sequence of one per
    type (the form the partition interface and the wire take).

    Raises:
        ValueError: a fanout :func:`check_fanout` refuses, or a sequence of another length.
    """
    if isinstance(fanout, (int, np.integer, bool, np.bool_)):
        return [check_fanout(fanout)] * num_etypes
    values = list(fanout)
    if len(values) != num_etypes:
        raise ValueError(f"fanout: {len(values)} values given for {num_etypes} edge types")
    return [check_fanout(v) for v in values]


def batch_layer_seeds(seed: int | None, output_nodes: Any, num_layers: int) -> list[int | None]:
    """The random seed of each sampling layer of one mini-batch, from the sampler's seed and the batch's
    output nodes: a batch draws the same sample whichever trainer, thread or epoch draws it.

    Args:
        seed: the sampler's seed; None draws fresh entropy (every entry None).
        output_nodes: the batch's output nodes: IDs (a tensor, array or sequence) on a graph with one node
            type, or ``{ntype: IDs}``.
        num_layers: how many seeds (one per layer or hop, output layer first).

    Returns:
        ``num_layers`` seeds in ``[0, 2**63)``, or ``num_layers`` Nones.
    """
    if seed is None:
        return [None] * num_layers
    if isinstance(output_nodes, Mapping):
        batch_key = 0
        for ntype, ids in output_nodes.items():
            batch_key = zlib.crc32(_id_bytes(ids), zlib.crc32(str(ntype).encode(), batch_key))
    else:
        batch_key = zlib.crc32(_id_bytes(output_nodes))
    states = np.random.SeedSequence([int(seed), batch_key]).generate_state(num_layers, np.uint64)
    return [int(state >> np.uint64(1)) for state in states]


def partition_seed(random_seed: int | None, part_id: int) -> int | None:
    """The seed one partition samples with in a call seeded with ``random_seed``: each partition draws
    from its own stream, so a seed reproduces the whole sample however the seeds are spread.

    Returns:
        A seed in ``[0, 2**63)``, or None for None.
    """
    return None if random_seed is None else (int(random_seed) * 1_000_003 + int(part_id)) % (1 << 63)


def _id_bytes(ids: Any) -> bytes:
    return np.ascontiguousarray(to_numpy(ids), dtype=np.int64).tobytes()
