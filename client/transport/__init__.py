"""How the client reaches a partition: over gRPC (:class:`RemotePartition`) or in this process
(:func:`open_in_process`). Both implement :class:`graphstore.types.PartitionAPI`."""

from graphstore.client.transport.inprocess import open_in_process
from graphstore.client.transport.remote import RemotePartition

__all__ = ["RemotePartition", "open_in_process"]
