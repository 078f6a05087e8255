"""Server-side sparse optimizer state and row updates (Adagrad, row-wise Adagrad, Adam).

A partition server keeps the optimizer state of each trainable tensor beside its rows, one state
row per local row, so the state is partitioned exactly like the tensor. ``PartitionServer.push_grad``
holds the tensor's write lock and calls :meth:`SparseOptimizerState.apply` with de-duplicated local
row indices and float32 gradients; the rows and their state are updated together, in place.

The update rules (``g`` is the gradient of one row, all arithmetic in float32):

- ``adagrad`` (one accumulator per element): ``G += g*g``; ``w -= lr * g / sqrt(G + eps)``.
- ``rowwise_adagrad`` (one accumulator per row): ``G += mean(g*g)``; ``w -= lr * g / sqrt(G + eps)``.
- ``adam`` (per-row step count ``t`` for bias correction): ``t += 1``; ``m = b1*m + (1-b1)*g``;
  ``v = b2*v + (1-b2)*g*g``; ``w -= lr * (m / (1 - b1**t)) / (sqrt(v / (1 - b2**t)) + eps)``.

State arrays are named by kind (see :data:`STATE_NAMES`), so a checkpoint's array names identify the
optimizer that wrote them.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

import numpy as np

from graphstore.types import OPTIMIZERS, OptimizerConfig

# The state arrays each kind keeps; the names are what checkpoints store.
STATE_NAMES: dict[str, tuple[str, ...]] = {
    "adagrad": ("adagrad_sum",),
    "rowwise_adagrad": ("rowwise_adagrad_sum",),
    "adam": ("adam_step", "adam_m", "adam_v"),
}


@dataclass
class _TensorState:
    """The optimizer kind and state arrays of one tensor on this partition."""

    kind: str
    arrays: dict[str, np.ndarray] = field(default_factory=dict)


def allocate_state(kind: str, num_rows: int, dim: int) -> dict[str, np.ndarray]:
    """Zero state arrays for ``num_rows`` rows of width ``dim`` (pages are touched lazily by calloc)."""
    if kind == "adagrad":
        return {"adagrad_sum": np.zeros((num_rows, dim), dtype=np.float32)}
    if kind == "rowwise_adagrad":
        return {"rowwise_adagrad_sum": np.zeros(num_rows, dtype=np.float32)}
    if kind == "adam":
        return {
            "adam_step": np.zeros(num_rows, dtype=np.int64),
            "adam_m": np.zeros((num_rows, dim), dtype=np.float32),
            "adam_v": np.zeros((num_rows, dim), dtype=np.float32),
        }
    raise ValueError(f"unknown optimizer kind {kind!r}; supported: {list(OPTIMIZERS)}")


def adagrad_update(
    rows: np.ndarray, state_sum: np.ndarray, ids: np.ndarray, grads: np.ndarray, lr: float, eps: float
) -> None:
    """Element-wise Adagrad on ``rows[ids]`` with accumulator ``state_sum`` (same shape as rows)."""
    acc = state_sum[ids]
    acc += grads * grads
    state_sum[ids] = acc
    acc += np.float32(eps)
    np.sqrt(acc, out=acc)
    step = grads / acc
    step *= np.float32(lr)
    rows[ids] -= step


def rowwise_adagrad_update(
    rows: np.ndarray, state_sum: np.ndarray, ids: np.ndarray, grads: np.ndarray, lr: float, eps: float
) -> None:
    """Row-wise Adagrad: one accumulator per row (``state_sum`` is 1-D), the mean of the squared grad."""
    acc = state_sum[ids] + np.mean(grads * grads, axis=1, dtype=np.float32)
    state_sum[ids] = acc
    denom = np.sqrt(acc + np.float32(eps))
    step = grads * (np.float32(lr) / denom)[:, None]
    rows[ids] -= step


def adam_update(
    rows: np.ndarray,
    state_step: np.ndarray,
    state_m: np.ndarray,
    state_v: np.ndarray,
    ids: np.ndarray,
    grads: np.ndarray,
    lr: float,
    eps: float,
    beta1: float,
    beta2: float,
) -> None:
    """Adam with a per-row step count ``state_step`` (int64) used for the bias correction."""
    steps = state_step[ids] + 1
    state_step[ids] = steps
    b1 = np.float32(beta1)
    b2 = np.float32(beta2)
    m = state_m[ids]
    m *= b1
    m += (np.float32(1.0) - b1) * grads
    v = state_v[ids]
    v *= b2
    v += (np.float32(1.0) - b2) * (grads * grads)
    state_m[ids] = m
    state_v[ids] = v
    # Bias corrections per row in float64 (b**t underflows gracefully to 0 for old rows).
    t = steps.astype(np.float64)
    corr1 = (1.0 - np.power(float(beta1), t)).astype(np.float32)
    corr2 = (1.0 - np.power(float(beta2), t)).astype(np.float32)
    denom = np.sqrt(v / corr2[:, None])
    denom += np.float32(eps)
    step = m / corr1[:, None]
    step /= denom
    step *= np.float32(lr)
    rows[ids] -= step


class SparseOptimizerState:
    """The sparse optimizer state of every trainable tensor of one partition.

    State is allocated lazily at a tensor's first update, one state row per local row. The caller
    (``PartitionServer.push_grad``) holds the tensor's write lock around :meth:`apply`, so the rows
    and their state change together; this object only guards its own table of tensors.
    """

    def __init__(self) -> None:
        self._states: dict[str, _TensorState] = {}
        self._table_lock = threading.Lock()

    def apply(
        self,
        name: str,
        rows: np.ndarray,
        local_ids: np.ndarray,
        grads: np.ndarray,
        config: OptimizerConfig,
    ) -> None:
        """Apply one optimizer step to ``rows[local_ids]`` in place and update the state.

        Every check runs before anything is written, so a rejected call changes nothing.

        Args:
            name: the tensor's name (keys the state).
            rows: the tensor's writable float32 storage on this partition, ``[num_local_rows, dim]``.
            local_ids: unique int64 local row indices.
            grads: float32 ``[len(local_ids), dim]`` gradients (already averaged over duplicates).
            config: the optimizer kind and hyper-parameters.

        Raises:
            ValueError: bad config, a kind different from the one this tensor's state was made with,
                rows not a writable 2-D float32 array, ids not unique / out of range, grads of the
                wrong shape or dtype, or non-finite grads.
        """
        if not isinstance(rows, np.ndarray) or rows.ndim != 2 or rows.dtype != np.float32:
            raise ValueError(
                f"tensor {name!r}: sparse optimizers update 2-D float32 tensors, got "
                f"{getattr(rows, 'dtype', type(rows))} with shape {getattr(rows, 'shape', None)}"
            )
        if not rows.flags.writeable:
            raise ValueError(f"tensor {name!r}: its storage is read-only")
        ids = np.asarray(local_ids)
        if ids.ndim != 1 or ids.dtype.kind not in "iu":
            raise ValueError(f"local_ids must be a 1-D integer array, got {ids.dtype} with shape {ids.shape}")
        ids = ids.astype(np.int64, copy=False)
        num_rows, dim = rows.shape
        grads = np.asarray(grads)
        if grads.dtype != np.float32:
            raise ValueError(f"grads must be float32, got {grads.dtype}")
        if grads.shape != (ids.shape[0], dim):
            raise ValueError(
                f"tensor {name!r}: grads shape {grads.shape} does not match {ids.shape[0]} ids x dim {dim}"
            )
        if ids.size == 0:
            return
        lo, hi = int(ids.min()), int(ids.max())
        if lo < 0 or hi >= num_rows:
            bad = lo if lo < 0 else hi
            raise ValueError(f"tensor {name!r}: local row id {bad} out of range [0, {num_rows})")
        sorted_ids = np.sort(ids)
        dup = np.flatnonzero(sorted_ids[1:] == sorted_ids[:-1])
        if dup.size:
            raise ValueError(
                f"tensor {name!r}: local_ids must be unique; row {int(sorted_ids[dup[0]])} appears twice"
            )
        if not np.isfinite(grads).all():
            raise ValueError(f"tensor {name!r}: grads contain NaN or infinity; nothing was applied")

        state = self._state_for(name, config.kind, num_rows, dim)
        arrays = state.arrays
        if config.kind == "adagrad":
            adagrad_update(rows, arrays["adagrad_sum"], ids, grads, config.lr, config.eps)
        elif config.kind == "rowwise_adagrad":
            rowwise_adagrad_update(rows, arrays["rowwise_adagrad_sum"], ids, grads, config.lr, config.eps)
        else:
            adam_update(
                rows,
                arrays["adam_step"],
                arrays["adam_m"],
                arrays["adam_v"],
                ids,
                grads,
                config.lr,
                config.eps,
                config.beta1,
                config.beta2,
            )

    def _state_for(self, name: str, kind: str, num_rows: int, dim: int) -> _TensorState:
        with self._table_lock:
            state = self._states.get(name)
            if state is None:
                state = _TensorState(kind, allocate_state(kind, num_rows, dim))
                self._states[name] = state
                return state
        if state.kind != kind:
            raise ValueError(
                f"tensor {name!r} has {state.kind!r} optimizer state; a {kind!r} step cannot use it "
                "(restore a matching checkpoint or recreate the tensor)"
            )
        for key, array in state.arrays.items():
            if array.shape[0] != num_rows or (array.ndim == 2 and array.shape[1] != dim):
                raise ValueError(
                    f"tensor {name!r}: optimizer state {key!r} has shape {array.shape}, the tensor has "
                    f"{num_rows} rows of width {dim}"
                )
        return state

    def kind(self, name: str) -> str | None:
        """The optimizer kind whose state ``name`` holds, or None when it has none."""
        with self._table_lock:
            state = self._states.get(name)
        return state.kind if state is not None else None

    def state_arrays(self, name: str) -> dict[str, np.ndarray]:
        """The state arrays of ``name`` (one row per local row), empty when it has no state.

        The arrays are the live storage: callers that write them elsewhere while updates run must
        hold the tensor's lock (the checkpoint does). Names are those of :data:`STATE_NAMES`.
        """
        with self._table_lock:
            state = self._states.get(name)
        return dict(state.arrays) if state is not None else {}

    def load_state_arrays(self, name: str, arrays: dict[str, np.ndarray], kind: str | None = None) -> None:
        """Install checkpointed state for ``name``, replacing any it had.

        Args:
            name: the tensor's name.
            arrays: the arrays :meth:`state_arrays` returned (rows in this partition's local order).
                Empty: ``name`` gets no state.
            kind: the optimizer kind; None or "" infers it from the array names.

        Raises:
            ValueError: an unknown kind, array names that do not match the kind, arrays whose row
                counts differ, or wrong dtypes / ranks.
        """
        if not arrays:
            self.drop(name)
            return
        inferred = [k for k, names in STATE_NAMES.items() if set(names) == set(arrays)]
        if not kind:
            if not inferred:
                raise ValueError(f"tensor {name!r}: state arrays {sorted(arrays)} match no optimizer kind")
            kind = inferred[0]
        if kind not in STATE_NAMES:
            raise ValueError(f"unknown optimizer kind {kind!r}; supported: {list(OPTIMIZERS)}")
        if set(arrays) != set(STATE_NAMES[kind]):
            raise ValueError(
                f"tensor {name!r}: {kind!r} state needs arrays {list(STATE_NAMES[kind])}, "
                f"got {sorted(arrays)}"
            )
        num_rows = {np.asarray(a).shape[0] if np.asarray(a).ndim else -1 for a in arrays.values()}
        if len(num_rows) != 1 or -1 in num_rows:
            raise ValueError(f"tensor {name!r}: state arrays have different row counts {sorted(num_rows)}")
        loaded: dict[str, np.ndarray] = {}
        for key, array in arrays.items():
            want_1d = key in ("rowwise_adagrad_sum", "adam_step")
            array = np.asarray(array)
            if array.ndim != (1 if want_1d else 2):
                raise ValueError(f"tensor {name!r}: state array {key!r} has shape {array.shape}")
            dtype = np.int64 if key == "adam_step" else np.float32
            loaded[key] = np.array(array, dtype=dtype, copy=True, order="C")
        with self._table_lock:
            self._states[name] = _TensorState(kind, loaded)

    def drop(self, name: str) -> None:
        """Forget the state of ``name`` (its tensor was deleted); no error when it has none."""
        with self._table_lock:
            self._states.pop(name, None)

    def names(self) -> list[str]:
        """Names of the tensors that have state."""
        with self._table_lock:
            return sorted(self._states)
