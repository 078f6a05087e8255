"""The request messages of the mutating calls (Push, PushGrad, Init, Checkpoint), built once per call or
chunk so that every retry sends the same request ID (:mod:`~graphstore.client.transport.request_ids`)."""

from __future__ import annotations

import numpy as np

from graphstore.protos import codec
from graphstore.protos import graphstore_pb2 as pb
from graphstore.types import InitSpec, OptimizerConfig

_INIT_KIND_TO_WIRE = {
    "zeros": pb.Initializer.ZEROS,
    "uniform": pb.Initializer.UNIFORM,
    "normal": pb.Initializer.NORMAL,
    "constant": pb.Initializer.CONSTANT,
    "pushed": pb.Initializer.PUSHED,
}
CHECKPOINT_PHASES = {"write": pb.WRITE, "commit": pb.COMMIT, "abort": pb.ABORT}


def push_request(
    name: str, wire_op: int, ids: np.ndarray, rows: np.ndarray, dtype: str | None
) -> pb.PushRequest:
    """A Push of ``rows`` (``dtype``: the wire dtype when it differs from the array's, e.g. bfloat16)."""
    request = pb.PushRequest(name=name, op=wire_op)
    codec.write_ids(request.ids, ids)
    codec.write_tensor(request.rows, rows, dtype)
    return request


def push_grad_request(
    name: str, ids: np.ndarray, grads: np.ndarray, optimizer: OptimizerConfig
) -> pb.PushGradRequest:
    """A PushGrad of float32 ``grads`` for rows ``ids``."""
    request = pb.PushGradRequest(name=name)
    codec.write_ids(request.ids, ids)
    codec.write_tensor(request.grads, grads, "float32")
    request.optimizer.kind = optimizer.kind
    request.optimizer.lr = optimizer.lr
    request.optimizer.eps = optimizer.eps
    request.optimizer.beta1 = optimizer.beta1
    request.optimizer.beta2 = optimizer.beta2
    return request


def init_request(
    name: str,
    shape: tuple[int, ...],
    dtype: str,
    policy: str,
    persistent: bool,
    init: InitSpec,
    owner: str,
) -> pb.InitRequest:
    """An Init of tensor ``name``.

    Raises:
        ValueError: an unknown initializer kind, dtype or policy.
    """
    if init.kind not in _INIT_KIND_TO_WIRE:
        raise ValueError(f"init.kind must be one of {sorted(_INIT_KIND_TO_WIRE)}, got {init.kind!r}")
    wire_policy, type_key = codec.policy_to_wire(policy)
    request = pb.InitRequest(
        name=name,
        dtype=codec.dtype_to_wire(dtype),
        policy=wire_policy,
        type=type_key,
        persistent=persistent,
        owner=owner,
    )
    request.shape[:] = [int(d) for d in shape]
    request.init.kind = _INIT_KIND_TO_WIRE[init.kind]
    request.init.a = init.a
    request.init.b = init.b
    request.init.seed = init.seed
    return request


def checkpoint_request(
    path: str, names: list[str] | None, save_id: str | None, phase: str = "write"
) -> pb.CheckpointRequest:
    """A Checkpoint: one server's files straight into ``path`` (no ``save_id``), or one phase of a
    cluster-wide save ``save_id`` (``"write"``, ``"commit"``, ``"abort"``).

    Raises:
        ValueError: an unknown phase, or a commit / abort without a ``save_id``.
    """
    if phase not in CHECKPOINT_PHASES:
        raise ValueError(f"phase must be one of {sorted(CHECKPOINT_PHASES)}, got {phase!r}")
    if phase != "write" and not save_id:
        raise ValueError(f"save_id: a checkpoint {phase} needs the save's ID")
    request = pb.CheckpointRequest(path=path, save_id=save_id or "", phase=CHECKPOINT_PHASES[phase])
    request.names[:] = list(names or [])
    return request
