"""The ``graphstore`` command line: generate, partition, server, launch, status, stop."""
