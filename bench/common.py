"""What the benchmarks share: their command line from a table of options, the servers of a local cluster
as cluster-config entries, and their figures printed as JSON (and saved with ``--out``)."""

from __future__ import annotations

import argparse
import json
import threading
from pathlib import Path


def emit_report(report: dict, out: str | None, indent: int = 2) -> None:
    """Print ``report`` as JSON on stdout and, when ``out`` is given, write the same text there.

    Args:
        report: the benchmark's figures.
        out: the ``--out`` path (its folder is created), or None / '' for stdout only.
        indent: JSON indentation.
    """
    text = json.dumps(report, indent=indent)
    print(text)
    if out:
        path = Path(out)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text + "\n")


def parse_options(doc: str, options: list[tuple], argv=None) -> argparse.Namespace:
    """Parse a benchmark's command line.

    Args:
        doc: the benchmark's docstring (its ``--help`` text).
        options: ``(flag, type, default, help)`` of every option, in ``--help`` order.
        argv: the arguments (default: ``sys.argv[1:]``).
    """
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    for flag, kind, default, help_text in options:
        parser.add_argument(flag, type=kind, default=default, help=help_text)
    return parser.parse_args(argv)


def server_entries(addresses: list[str]) -> list[dict]:
    """The ``servers`` of a cluster config for servers at ``host:port`` addresses, in partition order."""
    return [
        {"host": a.rsplit(":", 1)[0], "port": int(a.rsplit(":", 1)[1]), "part_id": part_id}
        for part_id, a in enumerate(addresses)
    ]


class GpuBusy:
    """The GPU's busy share while a ``with`` block runs: NVML's utilization (the share of each interval in
    which a kernel ran) read in a thread every ``interval_s`` and averaged; None where NVML does not
    answer (no GPU, no pynvml)."""

    def __init__(self, device, interval_s: float = 0.01):
        import torch

        self.device = torch.device(device)
        self.interval_s = interval_s
        self.samples: list[float] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.available = self.device.type == "cuda" and _utilization(self.device) is not None

    def __enter__(self):
        if self.available:
            self._thread = threading.Thread(target=self._run, daemon=True)
            self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            value = _utilization(self.device)
            if value is not None:
                self.samples.append(float(value))

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def share(self) -> float | None:
        return sum(self.samples) / (100.0 * len(self.samples)) if self.samples else None


def _utilization(device) -> float | None:
    import torch

    try:
        return torch.cuda.utilization(device)
    except Exception:  # noqa: BLE001 - no NVML (pynvml missing, no driver access): no reading
        return None
