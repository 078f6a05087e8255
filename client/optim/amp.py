"""Mixed precision with the sparse optimizers: their part in ``GradScaler``'s protocol.

Under fp16 autocast the loss is scaled (``scaler.scale(loss).backward()``), so the gradients recorded in
the DistEmbeddings' traces are scaled too. The sparse optimizers take part in the protocol that
``torch.amp.GradScaler`` (``torch.cuda.amp.GradScaler`` before torch 2.3) offers to optimizers with
their own scale handling:

- ``param_groups`` lists the recorded rows, so ``scaler.unscale_(sparse_opt)`` unscales their ``.grad``
  in place and records whether one is inf/NaN, as for any torch optimizer;
- ``_step_supports_amp_scaling`` makes ``scaler.step(sparse_opt)`` call ``step()`` on every trainer
  (a torch optimizer's step is skipped locally on an inf, which would leave the other trainers waiting
  in the collective step), with the attributes ``grad_scale`` (the scale still in the gradients, or
  None once unscaled) and ``found_inf`` (this trainer saw a non-finite gradient) set for the call.

``step()`` reads both with :func:`scaler_state`, unscales while gathering, and shares the flag with
the group in the status that already travels with the size exchange: when any trainer found a
non-finite gradient, every trainer skips the step and no server changes (all or nothing).
"""

from __future__ import annotations

import torch

# The attributes GradScaler.step sets on an optimizer with ``_step_supports_amp_scaling`` for the call.
GRAD_SCALE_ATTR = "grad_scale"
FOUND_INF_ATTR = "found_inf"


def scaler_state(optimizer) -> tuple[torch.Tensor | None, bool]:
    """What a ``GradScaler.step`` driving this step handed over.

    Args:
        optimizer: the sparse optimizer whose ``step()`` runs.

    Returns:
        ``(inv_scale, found_inf)``: the float32 factor that unscales the recorded gradients (None when
        they are not scaled: no scaler, a disabled one, or ``unscale_`` already ran), and whether this
        trainer found a non-finite gradient.
    """
    grad_scale = optimizer.__dict__.get(GRAD_SCALE_ATTR)
    found_inf = optimizer.__dict__.get(FOUND_INF_ATTR)
    inv_scale = None
    if isinstance(grad_scale, torch.Tensor):
        # As GradScaler.unscale_ does: the reciprocal in float64, applied in float32.
        inv_scale = grad_scale.detach().double().reciprocal().float()
    nonfinite = bool(found_inf.item()) if isinstance(found_inf, torch.Tensor) else False
    return inv_scale, nonfinite


def forget_scaler_state(optimizer) -> None:
    """Drop the attributes of a ``GradScaler.step`` whose ``step()`` raised (GradScaler deletes them only
    when ``step()`` returns), so that a later plain ``step()`` does not see a stale scale."""
    optimizer.__dict__.pop(GRAD_SCALE_ATTR, None)
    optimizer.__dict__.pop(FOUND_INF_ATTR, None)


def recorded_param_groups(embeddings) -> list[dict]:
    """The rows the embeddings recorded since the last step as one parameter group (``{"params": [...]}``),
    which GradScaler's ``unscale_`` and inf check walk.

    Args:
        embeddings: the optimizer's DistEmbeddings.

    Returns:
        A one-element list.
    """
    return [{"params": [rows for emb in embeddings for _, rows in emb.trace]}]
