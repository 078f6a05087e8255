"""How the client reaches a partition: over gRPC (:class:`RemotePartition`) or in this process
(:func:`open_in_process`). Both implement :class:`graphstore.types.PartitionAPI`. A write spread over
several servers whose failed parts can be sent again with the same request IDs is a
:class:`WriteBatch`."""

from graphstore.client.transport.inprocess import open_in_process
from graphstore.client.transport.remote import RemotePartition
from graphstore.client.transport.write_batch import WriteBatch

__all__ = ["RemotePartition", "WriteBatch", "open_in_process"]
