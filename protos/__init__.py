"""The wire protocol: ``graphstore.proto``, its generated stubs (``graphstore_pb2``,
``graphstore_pb2_grpc``), the tensor <-> message codec (``codec``), the hand-written pull answer
(``pull_wire``) and the service names (``service``).

The stubs are not imported here, so ``python -m graphstore.protos.codegen`` runs even when they are
missing or stale.
"""

from graphstore.protos.service import ERROR_METADATA_KEY, MUTATING_METHODS, SERVICE_NAME

__all__ = ["ERROR_METADATA_KEY", "MUTATING_METHODS", "SERVICE_NAME"]
