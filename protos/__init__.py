"""The wire protocol: ``graphstore.proto``, its generated stubs, and the tensor <-> message codec."""
