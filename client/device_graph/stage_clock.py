"""Time spent per stage of a loader's batches (routing, sampling held and remote partitions, relabeling,
gathering held rows, pulling remote rows), for profiles: off unless a benchmark turns it on.

On a GPU, work is queued and runs later; a clock made with ``sync=True`` waits for the device at the end
of each stage, so a stage's time is the time its work took (the pipeline then runs one stage at a time).
"""

from __future__ import annotations

import collections
import contextlib
import threading
import time
from collections.abc import Iterator

import torch


class StageClock:
    """Seconds and calls per stage name.

    Args:
        device: the device whose queued work a stage includes.
        sync: wait for ``device`` at the end of each stage.
    """

    def __init__(self, device: torch.device, sync: bool = True):
        self.device = torch.device(device)
        self.sync = bool(sync) and self.device.type == "cuda"
        self.seconds: collections.Counter[str] = collections.Counter()
        self.calls: collections.Counter[str] = collections.Counter()
        self._lock = threading.Lock()

    @contextlib.contextmanager
    def stage(self, name: str) -> Iterator[None]:
        """Time the enclosed work as stage ``name``."""
        start = time.perf_counter()
        try:
            yield
        finally:
            if self.sync:
                torch.cuda.synchronize(self.device)
            elapsed = time.perf_counter() - start
            with self._lock:
                self.seconds[name] += elapsed
                self.calls[name] += 1

    def reset(self) -> None:
        """Forget what was measured."""
        with self._lock:
            self.seconds.clear()
            self.calls.clear()


def timed(clock: StageClock | None, name: str) -> contextlib.AbstractContextManager:
    """``clock.stage(name)``, or nothing without a clock."""
    return contextlib.nullcontext() if clock is None else clock.stage(name)
