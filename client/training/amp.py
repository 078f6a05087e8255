"""Mixed precision of a training run: the ``amp`` setting's dtypes, the autocast context and the scaler."""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext

import torch

# ``amp`` setting -> the autocast dtype (None: full float32).
AMP_DTYPES: dict[str, torch.dtype | None] = {"none": None, "fp16": torch.float16, "bf16": torch.bfloat16}


def autocast_context(device: torch.device, amp: str) -> AbstractContextManager:
    """The context a forward pass runs in: ``torch.autocast`` for ``fp16`` / ``bf16``, else nothing.

    Args:
        device: where the model runs.
        amp: one of :data:`AMP_DTYPES`' keys.

    Returns:
        A context manager.

    Raises:
        ValueError: an unknown ``amp``.
    """
    if amp not in AMP_DTYPES:
        raise ValueError(f"amp must be one of {sorted(AMP_DTYPES)}, got {amp!r}")
    dtype = AMP_DTYPES[amp]
    if dtype is None:
        return nullcontext()
    return torch.autocast(device_type=device.type, dtype=dtype)


def make_grad_scaler(device: torch.device, amp: str):
    """A ``GradScaler`` that scales the loss under ``fp16`` (bfloat16 and float32 need none).

    The sparse optimizers step through it too (``scaler.step(sparse_opt)``): their gradients are unscaled
    and a step with an inf/NaN gradient on any trainer is skipped on all of them.

    Args:
        device: where the model runs.
        amp: the run's ``amp`` setting.

    Returns:
        The scaler (a pass-through one unless ``amp == 'fp16'``): ``torch.amp.GradScaler`` (torch >= 2.3),
        else ``torch.cuda.amp.GradScaler``.

    Raises:
        RuntimeError: ``fp16`` on the CPU with a torch older than 2.3 (which has no CPU scaler).
    """
    enabled = amp == "fp16"
    if hasattr(torch.amp, "GradScaler"):
        return torch.amp.GradScaler(device.type, enabled=enabled)
    if enabled and device.type != "cuda":
        raise RuntimeError(
            f"amp 'fp16' on {device.type} needs torch >= 2.3 (a GradScaler for that device); this is torch "
            f"{torch.__version__}: use amp 'bf16' or a newer torch"
        )
    return torch.cuda.amp.GradScaler(enabled=enabled)
