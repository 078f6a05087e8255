"""Contracts of the client package: call policy and client configuration."""

from graphstore.rpc import RpcPolicy

__all__ = ["RpcPolicy"]
