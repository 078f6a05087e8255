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


def make_grad_scaler(device: torch.device, amp: str) -> torch.amp.GradScaler:
    """A ``GradScaler`` that scales the loss under ``fp16`` (bfloat16 and float32 need none).

    Args:
        device: where the model runs.
        amp: the run's ``amp`` setting.

    Returns:
        The scaler (a pass-through one unless ``amp == 'fp16'``).
    """
    return torch.amp.GradScaler(device.type, enabled=amp == "fp16")
