"""The ``graphstore`` command line (generate, partition, server, launch, status, stop) and helpers to
run servers on this host from Python.

Kept light: importing it loads neither torch nor the server, so ``graphstore status`` stays quick.
"""

from graphstore.launcher.cli import main
from graphstore.launcher.local_servers import ServerGroup, start_servers, wait_serving

__all__ = ["ServerGroup", "main", "start_servers", "wait_serving"]
