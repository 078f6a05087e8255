"""How the client reaches a partition: over gRPC (:class:`RemotePartition`) or in this process
(:func:`open_in_process`). Both implement :class:`graphstore.types.PartitionAPI`. A write spread over
several servers whose failed parts can be sent again with the same request IDs is a
:class:`WriteBatch`.

The names are loaded on first use (:mod:`graphstore.lazy`), so :mod:`.channel` (grpc only: the
launcher's health probe and Shutdown) imports neither numpy nor the server.
"""

from typing import TYPE_CHECKING

from graphstore.lazy import lazy_exports

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "RemotePartition": "graphstore.client.transport.remote",
        "WriteBatch": "graphstore.client.transport.write_batch",
        "open_in_process": "graphstore.client.transport.inprocess",
    },
)

if TYPE_CHECKING:  # the same names, for type checkers and editors
    from graphstore.client.transport.inprocess import open_in_process
    from graphstore.client.transport.remote import RemotePartition
    from graphstore.client.transport.write_batch import WriteBatch

__all__ = ["RemotePartition", "WriteBatch", "open_in_process"]
