"""Every implementation of ``PartitionAPI`` defines each of its operations (itself or in a base class of
its own), with the contract's parameters and defaults: the in-process server, the gRPC transport and the
replicated transport (whose owner-bound calls are explicit methods, not a ``__getattr__`` pass-through
that no check could see)."""

from __future__ import annotations

import inspect

import pytest

from graphstore.client.transport.remote import RemotePartition
from graphstore.client.transport.replicated import ReplicatedPartition
from graphstore.server.partition_server import PartitionServer
from graphstore.types import PartitionAPI

OPERATIONS = [
    name for name, value in vars(PartitionAPI).items() if callable(value) and not name.startswith("_")
]


def _defined(implementation, name: str):
    """``name`` as a class of the implementation's own hierarchy defines it (None: not defined)."""
    for klass in implementation.__mro__:
        if klass is not object and name in vars(klass):
            return vars(klass)[name]
    return None


def _parameters(function) -> list[tuple[str, object]]:
    return [(name, p.default) for name, p in inspect.signature(function).parameters.items()]


@pytest.mark.parametrize("implementation", [PartitionServer, RemotePartition, ReplicatedPartition])
def test_each_operation_is_defined_with_the_contracts_parameters(implementation):
    assert len(OPERATIONS) >= 17
    assert "__getattr__" not in vars(implementation)
    for name in OPERATIONS:
        defined = _defined(implementation, name)
        assert defined is not None, f"{implementation.__name__} does not define {name}"
        assert _parameters(defined) == _parameters(getattr(PartitionAPI, name)), name


def test_the_replicated_transport_offers_what_the_client_calls_on_a_remote_one():
    """The non-contract calls the client makes on a remote partition (readiness, stats, shutdown,
    prepared gradient pushes, schemes, call policy) exist on the replicated one too."""
    extra = ["health", "wait_ready", "shutdown", "prepare_push_grad", "tensor_scheme", "close"]
    for name in extra:
        assert name in vars(ReplicatedPartition), name
        assert _parameters(vars(ReplicatedPartition)[name]) == _parameters(_defined(RemotePartition, name)), (
            name
        )
    owner = RemotePartition("127.0.0.1:1", part_id=0)  # no call is made: nothing needs to answer
    replicated = ReplicatedPartition(owner, [owner], ["owner"], set())
    try:
        for name in ("address", "policy", "max_call_time_s", "part_id"):
            assert getattr(replicated, name) == getattr(owner, name), name
    finally:
        replicated.close()
