"""``StepTimings``: where the time of the sparse optimizers' steps goes, phase by phase."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class StepTimings:
    """Cumulative wall time (seconds) of the phases of the sparse optimizers' ``step()``.

    Attributes:
        steps: number of completed steps.
        gather_s: reading gradients from the traces and the local duplicate sum.
        exchange_s: the size exchange and the all_to_all of ids and gradients.
        merge_s: the owner's de-duplication and averaging.
        push_s: the PushGrad RPCs (they include the server's update).
        sync_s: waiting for the other trainers' pushes (groups of more than one trainer).
        rows_pushed: unique rows this trainer pushed.
        steps_skipped: steps a GradScaler's inf/NaN check skipped on every trainer (not in ``steps``).
    """

    steps: int = 0
    gather_s: float = 0.0
    exchange_s: float = 0.0
    merge_s: float = 0.0
    push_s: float = 0.0
    sync_s: float = 0.0
    rows_pushed: int = 0
    steps_skipped: int = 0
