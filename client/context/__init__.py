"""The process's one connection to the cluster, and the rank of this trainer.

Every client object talks to the partitions through the :class:`ClientContext` that
:func:`get_context` returns: distributed after ``initialize()`` (:mod:`.connect` opens the servers and
the co-located partition), or standalone (every partition in-process) for a ``DistGraph`` opened with a
``part_config`` and no ``initialize()``. The context held by :mod:`.process_context` is the only
process-global mutable state of the client.
"""

from graphstore.client.context.client_context import ClientContext
from graphstore.client.context.process_context import (
    context_lock,
    current_context,
    get_context,
    set_context,
    standalone_context,
)
from graphstore.client.context.trainer_rank import trainer_rank_and_world

__all__ = [
    "ClientContext",
    "context_lock",
    "current_context",
    "get_context",
    "set_context",
    "standalone_context",
    "trainer_rank_and_world",
]
