"""One partition server: storage, sampling, optimizer state, barriers, checkpoints, the gRPC servicer.

:class:`PartitionServer` answers :class:`graphstore.types.PartitionAPI` in-process;
:func:`serve` runs it behind gRPC with the settings of a :class:`ServerConfig`.
"""

from graphstore.server.main import serve
from graphstore.server.partition_server import PartitionServer
from graphstore.server.server_config import ServerConfig

__all__ = ["PartitionServer", "ServerConfig", "serve"]
