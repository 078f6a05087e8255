"""Creating a DistTensor on the servers: its shape and partition policy checked, then created on (or
attached to) every partition, with what was created rolled back when a partition holds the name with
another scheme."""

from __future__ import annotations

import logging

import numpy as np

from graphstore.client.context import ClientContext
from graphstore.errors import ServerError
from graphstore.partition import PartitionPolicy
from graphstore.types import EDGE, NODE, InitSpec, TensorScheme

logger = logging.getLogger(__name__)


def check_shape(shape) -> tuple[int, ...]:
    """A DistTensor's shape as a tuple of ints.

    Raises:
        ValueError: not integers, a negative dimension, or an empty first dimension.
    """
    if isinstance(shape, (int, np.integer)):
        shape = (int(shape),)
    try:
        shape = tuple(int(s) for s in shape)
    except TypeError:
        raise ValueError(f"shape must be a tuple of integers, got {shape!r}") from None
    if not shape or any(s < 0 for s in shape) or shape[0] == 0:
        raise ValueError(f"shape must be non-empty with a positive first dimension, got {shape}")
    return shape


def resolve_policy(part_policy, num_rows: int, ctx: ClientContext) -> str:
    """The partition policy (the ID space: ``"node"``, ``"edge"``, ``"node:<ntype>"``,
    ``"edge:<src>:<etype>:<dst>"``) of a tensor of ``num_rows`` rows.

    Args:
        part_policy: a policy string (DGL's ``'node:_N'`` / ``'edge:_E'`` included), a PartitionPolicy,
            or None to infer it from ``num_rows`` (homogeneous ID spaces only).
        num_rows: the tensor's first dimension.
        ctx: the client context (the graph's node and edge counts).

    Raises:
        ValueError: an ambiguous row count, or a policy that does not match it.
        KeyError: a policy naming an unknown type.
        TypeError: a ``part_policy`` of another type.
    """
    num_nodes, num_edges = ctx.num_rows(NODE), ctx.num_rows(EDGE)
    if part_policy is None:
        if num_rows == num_nodes and num_rows == num_edges:
            raise ValueError(
                f"shape[0]={num_rows} is both the number of nodes and of edges; "
                "pass part_policy='node' or 'edge'"
            )
        if num_rows == num_nodes:
            return NODE
        if num_rows == num_edges:
            return EDGE
        raise ValueError(
            f"shape[0]={num_rows} matches neither the number of nodes ({num_nodes}) "
            f"nor of edges ({num_edges})"
        )
    if isinstance(part_policy, PartitionPolicy):
        policy = part_policy.policy
        label = part_policy.policy_str
    elif isinstance(part_policy, str):
        policy = PartitionPolicy(part_policy, ctx.book).policy
        label = part_policy
    else:
        raise TypeError(
            f"part_policy must be 'node', 'edge', 'node:<ntype>', 'edge:<etype>' or a PartitionPolicy, "
            f"got {part_policy!r}"
        )
    expected = ctx.num_rows(policy)
    if num_rows != expected:
        raise ValueError(f"shape[0]={num_rows} does not match part_policy {label!r} ({expected} rows)")
    return policy


def create_on_servers(
    ctx: ClientContext,
    name: str,
    shape: tuple[int, ...],
    dtype_name: str,
    policy: str,
    persistent: bool,
    spec: InitSpec,
) -> tuple[list[bool], TensorScheme]:
    """Create or attach ``name`` on every partition; roll back what was created on a conflict.

    Returns:
        ``(created, scheme)``: per partition whether this call created the tensor there, and its scheme.

    Raises:
        ValueError: ``name`` exists with another scheme (the message names both).
    """

    def init_on(part_id: int):
        try:
            return ctx.partition(part_id).init_tensor(
                name, shape, dtype_name, policy, persistent=persistent, init=spec, owner=ctx.client_id
            )
        except FileExistsError as exc:
            return exc

    results = ctx.run_parallel([lambda p=p: init_on(p) for p in range(ctx.num_parts)])
    conflicts = [r for r in results if isinstance(r, FileExistsError)]
    if conflicts:
        created = [p for p, r in enumerate(results) if not isinstance(r, FileExistsError) and r[0]]
        for part_id in created:
            try:
                ctx.partition(part_id).delete_tensor(name)
            except (KeyError, ServerError) as exc:
                logger.warning("could not roll back %r on partition %d: %s", name, part_id, exc)
        existing = ctx.tensor_scheme(name, refresh=True)
        found = (
            f"shape {tuple(existing.shape)}, dtype {existing.dtype}, policy {existing.policy!r}"
            if existing is not None
            else f"another scheme ({conflicts[0]})"
        )
        raise ValueError(
            f"DistTensor {name!r} already exists with {found}; requested shape {shape}, dtype {dtype_name}, "
            f"policy {policy!r}"
        )
    created = [bool(r[0]) for r in results]
    scheme = results[0][1]
    ctx.remember_scheme(scheme)
    return created, scheme
