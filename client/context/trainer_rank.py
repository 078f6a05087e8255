"""This trainer's rank and the size of its trainer group, from ``torch.distributed`` or the environment."""

from __future__ import annotations

import os


def trainer_rank_and_world() -> tuple[int, int]:
    """Rank and size of the trainer group: from torch.distributed when it is initialized, else the
    ``RANK`` / ``WORLD_SIZE`` environment variables, else ``(0, 1)``.

    Raises:
        ValueError: when RANK / WORLD_SIZE are set but not valid integers.
    """
    try:
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
            return int(dist.get_rank()), int(dist.get_world_size())
    except ImportError:  # pragma: no cover - torch is a dependency
        pass
    rank = _env_int("RANK", 0)
    world = _env_int("WORLD_SIZE", 1)
    if world < 1 or not 0 <= rank < world:
        raise ValueError(f"environment RANK={rank} / WORLD_SIZE={world} are inconsistent")
    return rank, world


def _env_int(name: str, default: int) -> int:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    try:
        return int(value)
    except ValueError:
        raise ValueError(f"environment variable {name}={value!r} is not an integer") from None
