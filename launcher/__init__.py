"""The ``graphstore`` command line (generate, partition, server, launch, status, stop; the entry point is
``graphstore.launcher.cli:main``) and helpers to run servers on this host from Python.

Kept light: importing it loads neither torch nor the server, so ``graphstore status`` stays quick. The
command line's module is not imported here, so ``python -m graphstore.launcher.cli`` runs it cleanly.
"""

from graphstore.launcher.local_servers import ServerGroup, start_servers, wait_serving

__all__ = ["ServerGroup", "start_servers", "wait_serving"]
