"""Names the client and the server must agree on beyond the messages themselves.

``SERVICE_NAME`` is the gRPC service of ``graphstore.proto`` (method paths are
``/SERVICE_NAME/Method``; the health service reports its status under it too), and a failed call
carries the Python type of its error in the trailing metadata under ``ERROR_METADATA_KEY``, so
the remote transport raises the same exception type as the in-process server.
``MUTATING_METHODS`` carry a request ID: the server applies each at most once, so the client may
retry them after any ambiguous failure (UNAVAILABLE, DEADLINE_EXCEEDED) with the same ID.
"""

SERVICE_NAME = "graphstore.PartitionService"
ERROR_METADATA_KEY = "graphstore-error"
MUTATING_METHODS = ("Push", "PushGrad", "Init", "Delete", "Checkpoint", "Restore")
